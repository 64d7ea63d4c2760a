use proptest::prelude::*;

use super::*;

fn class_of(i: u8) -> Class {
    Class::ALL[(i % 4) as usize]
}

fn fields() -> impl Strategy<Value = Vec<(u8, u32, Option<u32>)>> {
    prop::collection::vec(
        (
            any::<u8>(),
            1u32..=64,
            prop::option::weighted(0.2, 0u32..200),
        ),
        0..24,
    )
}

fn build(spec: &[(u8, u32, Option<u32>)]) -> (LayoutBuilder, Vec<FieldHandle>) {
    let mut b = LayoutBuilder::new();
    let hs = spec
        .iter()
        .map(|&(c, bits, off)| b.add_field(class_of(c), "f", bits, off))
        .collect();
    (b, hs)
}

proptest! {
    #[test]
    fn compiled_fields_never_overlap_and_stay_inside_their_class_header(spec in fields()) {
        let (b, _) = build(&spec);
        let Ok(l) = b.compile() else {
            // Only fixed offsets can clash; free fields always find room.
            prop_assert!(spec.iter().filter(|f| f.2.is_some()).count() >= 2);
            return Ok(());
        };
        let p = l.fields();
        for (i, a) in p.iter().enumerate() {
            prop_assert!((a.offset + a.bits) as usize <= l.class_bytes(a.class) * 8);
            if let Some(off) = spec[i].2 {
                prop_assert_eq!(a.offset, off);
            }
            for b in &p[i + 1..] {
                let apart = a.class != b.class
                    || a.offset + a.bits <= b.offset
                    || b.offset + b.bits <= a.offset;
                prop_assert!(apart, "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn every_value_round_trips_in_both_byte_orders(
        spec in fields(),
        values in prop::collection::vec(any::<u64>(), 24),
        little in any::<bool>(),
    ) {
        let (b, hs) = build(&spec);
        let Ok(l) = b.compile() else { return Ok(()) };
        let order = if little { ByteOrder::Little } else { ByteOrder::Big };
        let mut hdr = l.headers();
        for (h, v) in hs.iter().zip(&values) {
            l.set(&mut hdr, order, *h, *v);
        }
        for (h, v) in hs.iter().zip(&values) {
            let bits = l.bits(*h);
            let mask = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
            prop_assert_eq!(l.get(&hdr, order, *h), v & mask);
        }
    }

    /// The word-at-a-time accessors read and write what the byte loop
    /// does, wherever the field sits in buffers of any length.
    #[test]
    fn word_accessors_agree_with_the_byte_loop(
        buf in prop::collection::vec(any::<u8>(), 0..24),
        bit in 0u32..200,
        bits in 1u32..=64,
        value in any::<u64>(),
        little in any::<bool>(),
    ) {
        let order = if little { ByteOrder::Little } else { ByteOrder::Big };
        prop_assert_eq!(
            super::read_bits(&buf, order, bit, bits),
            super::read_bits_bytewise(&buf, order, bit, bits)
        );
        let (mut a, mut b) = (buf.clone(), buf);
        super::write_bits(&mut a, order, bit, bits, value);
        super::write_bits_bytewise(&mut b, order, bit, bits, value);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn free_fields_pack_without_padding_beyond_a_byte_per_class(
        widths in prop::collection::vec(1u32..=7, 1..20),
    ) {
        // Sub-byte fields are placed bit by bit: the header is the sum of the
        // widths rounded up to a byte, whatever the order of declaration.
        let mut b = LayoutBuilder::new();
        for w in &widths {
            b.add_field(Class::Protocol, "f", *w, None);
        }
        let l = b.compile().unwrap();
        let sum: u32 = widths.iter().sum();
        prop_assert_eq!(l.class_bytes(Class::Protocol) as u32, sum.div_ceil(8));
    }
}

#[test]
fn big_endian_fields_read_as_network_order_bytes() {
    let mut b = LayoutBuilder::new();
    let x = b.add_field(Class::Protocol, "x", 16, Some(0));
    let flag = b.add_field(Class::Protocol, "flag", 1, Some(16));
    let l = b.compile().unwrap();
    let mut hdr = l.headers();
    l.set(&mut hdr, ByteOrder::Big, x, 0x1234);
    l.set(&mut hdr, ByteOrder::Big, flag, 1);
    assert_eq!(hdr, [0x12, 0x34, 0x80]);
    let mut hdr = l.headers();
    l.set(&mut hdr, ByteOrder::Little, x, 0x1234);
    l.set(&mut hdr, ByteOrder::Little, flag, 1);
    assert_eq!(hdr, [0x34, 0x12, 0x01]);
}

#[test]
fn fields_of_different_layers_share_a_byte() {
    // Three layers' flags and a 13-bit number fit two bytes, where
    // per-layer 4-byte alignment would take twelve.
    let mut b = LayoutBuilder::new();
    let a = b.add_field(Class::Protocol, "frag", 1, None);
    let n = b.add_field(Class::Protocol, "seq", 13, None);
    let c = b.add_field(Class::Protocol, "ack-only", 1, None);
    let d = b.add_field(Class::Protocol, "probe", 1, None);
    let l = b.compile().unwrap();
    assert_eq!(l.class_bytes(Class::Protocol), 2);
    let mut hdr = l.headers();
    for (h, v) in [(a, 1), (n, 0x1abc), (c, 0), (d, 1)] {
        l.set(&mut hdr, ByteOrder::NATIVE, h, v);
    }
    assert_eq!(l.get(&hdr, ByteOrder::NATIVE, n), 0x1abc);
    assert_eq!(l.get(&hdr, ByteOrder::NATIVE, c), 0);
}

#[test]
fn overlapping_offsets_and_bad_widths_are_refused() {
    let mut b = LayoutBuilder::new();
    b.add_field(Class::Message, "a", 8, Some(0));
    b.add_field(Class::Message, "b", 8, Some(4));
    assert_eq!(b.compile().unwrap_err(), LayoutError::Overlap("a", "b"));
    let mut b = LayoutBuilder::new();
    b.add_field(Class::Message, "wide", 65, None);
    assert!(matches!(b.compile(), Err(LayoutError::Width { .. })));
}

#[test]
fn a_handle_of_another_layout_reads_zero_and_writes_nothing() {
    let l = LayoutBuilder::new().compile().unwrap();
    let mut hdr = l.headers();
    assert_eq!(l.get(&hdr, ByteOrder::Big, FieldHandle(3)), 0);
    l.set(&mut hdr, ByteOrder::Big, FieldHandle(3), 7);
    assert!(!l.is_valid(FieldHandle(3)));
}

proptest! {
    /// A layout's accessors (each field's eight bytes resolved once) read
    /// and write what the byte loop does, in buffers of the layout's length,
    /// longer, and shorter.
    #[test]
    fn layout_accessors_agree_with_the_byte_loop(
        spec in fields(),
        pick in any::<prop::sample::Index>(),
        fill in prop::collection::vec(any::<u8>(), 64),
        cut in 0usize..80,
        value in any::<u64>(),
        little in any::<bool>(),
    ) {
        let (b, hs) = build(&spec);
        let Ok(l) = b.compile() else { return Ok(()) };
        if hs.is_empty() {
            return Ok(());
        }
        let h = hs[pick.index(hs.len())];
        let (bit, bits) = l.position(h).unwrap();
        let order = if little { ByteOrder::Little } else { ByteOrder::Big };
        let mut buf: Vec<u8> = fill.iter().cycle().take(cut.min(l.total_bytes() + 16)).copied().collect();
        prop_assert_eq!(l.get(&buf, order, h), super::read_bits_bytewise(&buf, order, bit, bits));
        let mut want = buf.clone();
        super::write_bits_bytewise(&mut want, order, bit, bits, value);
        l.set(&mut buf, order, h, value);
        prop_assert_eq!(buf, want);
    }
}
