//! The Internet checksum over a full Ethernet-MTU TCP payload and over a
//! 64 KB super-segment, at the offsets a send buffer slices them from:
//! `cargo bench -p strata-core --bench checksum`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_core::checksum::{Checksum, checksum};

fn sums(c: &mut Criterion) {
    let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut group = c.benchmark_group("checksum");
    for len in [1448usize, 65536] {
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(format!("{len} bytes"), |b| {
            let mut at = 0;
            b.iter(|| {
                at = (at + len) % (data.len() - len);
                black_box(checksum(black_box(&data[at..at + len])))
            })
        });
    }
    // A segment as TCP sums it: pseudo-header, 32-byte header, payload.
    group.throughput(Throughput::Bytes(1480));
    group.bench_function("segment in two chunks", |b| {
        let (header, payload) = (&data[..32], &data[4096..4096 + 1448]);
        b.iter(|| {
            let mut c = Checksum::new();
            c.add_pseudo_header([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 6, 1480);
            c.add(black_box(header));
            c.add(black_box(payload));
            black_box(c.finish())
        })
    });
    group.finish();
}

criterion_group!(benches, sums);
criterion_main!(benches);
