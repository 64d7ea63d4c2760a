//! TCP offloads in software: a 64 KB super-segment cut into 1448-byte
//! segments, and the segments merged back by receive offload, each with its
//! checksums computed or verified — the in-memory link's work per super-segment
//! (`cargo bench -p strata-link --bench offload`).

use std::hint::black_box;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_core::Message;
use strata_link::offload::{Coalescer, segment};

const MSS: usize = 1448;

/// An Ethernet + IPv4 + TCP (timestamps) super-segment of 45 full segments
/// of `data`, as Strata's TCP hands it down (the header's checksum fields are
/// recomputed by the cut).
fn super_segment(data: &Bytes) -> Message {
    let mut h = [0u8; 66];
    h[12..14].copy_from_slice(&[0x08, 0x00]);
    h[14] = 0x45;
    h[14 + 8] = 64;
    h[14 + 9] = 6;
    h[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
    h[14 + 16..14 + 20].copy_from_slice(&[198, 18, 0, 2]);
    h[34 + 12] = 8 << 4;
    h[34 + 13] = 0x10;
    let mut m = Message::from_bytes(data.clone());
    m.push_slice(&h);
    m.set_segment_size(MSS as u16);
    m
}

fn offloads(c: &mut Criterion) {
    let data = Bytes::from(
        (0..45 * MSS)
            .map(|i| (i * 7 + 3) as u8)
            .collect::<Vec<u8>>(),
    );
    let mut group = c.benchmark_group("offload");
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function("cut 45 segments", |b| {
        b.iter(|| {
            let mut n = 0;
            for f in segment(super_segment(&data)).ok().into_iter().flatten() {
                n += black_box(f).len();
            }
            n
        })
    });
    let frames: Vec<Message> = segment(super_segment(&data))
        .ok()
        .into_iter()
        .flatten()
        .collect();
    group.bench_function("merge 45 segments", |b| {
        let mut gro = Coalescer::new();
        b.iter(|| {
            let mut n = 0;
            for f in frames.iter().cloned() {
                gro.push(f, &mut |m| n += black_box(m).len());
            }
            gro.flush(&mut |m| n += black_box(m).len());
            n
        })
    });
    group.finish();
}

criterion_group!(benches, offloads);
criterion_main!(benches);
