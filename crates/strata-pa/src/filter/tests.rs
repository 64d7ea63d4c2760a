use proptest::prelude::*;

use super::*;
use crate::field::{Class, LayoutBuilder};

fn layout() -> Layout {
    let mut b = LayoutBuilder::new();
    b.add_field(Class::Protocol, "seq", 13, None);
    b.add_field(Class::Protocol, "frag", 1, None);
    b.add_field(Class::Message, "sum", 16, None);
    b.add_field(Class::Message, "len", 11, None);
    b.add_field(Class::Gossip, "ack", 64, None);
    b.compile().unwrap()
}

fn op() -> impl Strategy<Value = Op> {
    // Handles up to 7 for a layout of 5 fields: some are invalid.
    let h = (0u16..7).prop_map(FieldHandle);
    prop_oneof![
        any::<u64>().prop_map(Op::PushConstant),
        (0u64..4).prop_map(Op::PushConstant),
        h.clone().prop_map(Op::PushField),
        Just(Op::PushSize),
        h.clone().prop_map(|h| Op::Digest(Digest::Sum16(h))),
        h.prop_map(Op::PopField),
        prop_oneof![
            Just(Op::Add),
            Just(Op::Sub),
            Just(Op::And),
            Just(Op::Or),
            Just(Op::Xor),
            Just(Op::Eq),
            Just(Op::Ne),
            Just(Op::Lt),
            Just(Op::Gt),
        ],
        (0u64..3).prop_map(Op::Return),
        (1u64..3).prop_map(Op::Abort),
    ]
}

/// A reference machine that reports what a verified program must never do.
/// With `fire` false an `Abort` only pops: the path the verifier must check.
fn strict(ops: &[Op], l: &Layout, f: &mut Frame, fire: bool) -> Result<u64, &'static str> {
    let mut s: Vec<u64> = Vec::new();
    for &op in ops {
        match op {
            Op::PushConstant(c) => s.push(c),
            Op::PushField(h) | Op::PopField(h) | Op::Digest(Digest::Sum16(h)) if !l.is_valid(h) => {
                return Err("bad field");
            }
            Op::PushField(h) => s.push(l.get(f.hdr, f.order, h)),
            Op::PushSize => s.push(f.data.len() as u64),
            Op::Digest(d) => s.push(d.of(&Cover::new(l, d), f.hdr, f.order, f.data)),
            Op::PopField(h) => {
                let v = s.pop().ok_or("underflow")?;
                l.set(f.hdr, f.order, h, v);
            }
            Op::Return(v) => return Ok(v),
            Op::Abort(v) => {
                if s.pop().ok_or("underflow")? != 0 && fire {
                    return Ok(v);
                }
            }
            _ => {
                let b = s.pop().ok_or("underflow")?;
                let a = s.pop().ok_or("underflow")?;
                s.push(binop(op, a, b));
            }
        }
        if s.len() > MAX_DEPTH {
            return Err("overflow");
        }
    }
    Err("fell off the end")
}

proptest! {
    #[test]
    fn random_programs_are_refused_or_run_safely_and_both_runners_agree(
        ops in prop::collection::vec(op(), 0..40),
        data in prop::collection::vec(any::<u8>(), 0..64).prop_map(|d| Message::from_slice(&d)),
        little in any::<bool>(),
    ) {
        let l = layout();
        let order = if little { ByteOrder::Little } else { ByteOrder::Big };
        let Ok(v) = verify(&ops, &l) else {
            // Refused: on the path where no Abort fires, something is wrong.
            let mut hdr = l.headers();
            let mut f = Frame { hdr: &mut hdr, order, data: &data };
            prop_assert!(strict(&ops, &l, &mut f, false).is_err());
            return Ok(());
        };
        prop_assert!(v.depth() <= MAX_DEPTH);
        let (mut a, mut b, mut c) = (l.headers(), l.headers(), l.headers());
        let want = strict(v.ops(), &l, &mut Frame { hdr: &mut a, order, data: &data }, true);
        prop_assert!(want.is_ok(), "verified program failed: {:?}", want);
        let interp = v.run(&l, &mut Frame { hdr: &mut b, order, data: &data });
        let compiled = v.compile(&l).run(&mut Frame { hdr: &mut c, order, data: &data });
        prop_assert_eq!(want.unwrap(), interp);
        prop_assert_eq!(interp, compiled);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(&b, &c);
    }
}

#[test]
fn a_send_filter_fills_the_checksum_and_refuses_large_messages() {
    let l = layout();
    let (sum, len) = (FieldHandle(2), FieldHandle(3));
    let prog = [
        Op::PushSize,
        Op::PushConstant(1024),
        Op::Gt,
        Op::Abort(1),
        Op::PushSize,
        Op::PopField(len),
        Op::Digest(Digest::Sum16(sum)),
        Op::PopField(sum),
        Op::Return(0),
    ];
    let v = verify(&prog, &l).unwrap();
    assert_eq!(v.depth(), 2);
    let mut hdr = l.headers();
    let data = &Message::from_slice(b"hello, world");
    let mut f = Frame {
        hdr: &mut hdr,
        order: ByteOrder::Big,
        data,
    };
    assert_eq!(v.run(&l, &mut f), 0);
    // All four headers, `sum` as zero, then the data.
    let mut want = l.headers();
    l.set(&mut want, ByteOrder::Big, len, 12);
    want.extend_from_slice(b"hello, world");
    assert_eq!(
        l.get(&hdr, ByteOrder::Big, sum),
        u64::from(strata_core::checksum::checksum(&want))
    );
    assert_eq!(l.get(&hdr, ByteOrder::Big, len), 12);
    let big = Message::from_slice(&[0u8; 2000]);
    let mut f = Frame {
        hdr: &mut hdr,
        order: ByteOrder::Big,
        data: &big,
    };
    assert_eq!(v.compile(&l).run(&mut f), 1);
}

#[test]
fn the_verifier_names_what_is_wrong() {
    let l = layout();
    assert_eq!(
        verify(&[Op::Add, Op::Return(0)], &l).unwrap_err(),
        VerifyError::Underflow(0)
    );
    assert_eq!(
        verify(&[Op::PushField(FieldHandle(9)), Op::Return(0)], &l).unwrap_err(),
        VerifyError::BadField(0)
    );
    assert_eq!(
        verify(&[Op::PushSize], &l).unwrap_err(),
        VerifyError::NoReturn
    );
    let deep = vec![Op::PushSize; MAX_DEPTH + 1];
    assert_eq!(
        verify(&deep, &l).unwrap_err(),
        VerifyError::Overflow(MAX_DEPTH)
    );
}

/// A value-pushing operation (what the compiler fuses), valid or not.
fn operand() -> impl Strategy<Value = Op> {
    let h = (0u16..6).prop_map(FieldHandle);
    prop_oneof![
        (0u64..4).prop_map(Op::PushConstant),
        any::<u64>().prop_map(Op::PushConstant),
        Just(Op::PushSize),
        h.clone().prop_map(Op::PushField),
        h.prop_map(|h| Op::Digest(Digest::Sum16(h))),
    ]
}

/// A run of operations the compiler fuses into one closure, or a single
/// random operation between them.
fn block() -> impl Strategy<Value = Vec<Op>> {
    let binop = prop_oneof![
        Just(Op::Add),
        Just(Op::Sub),
        Just(Op::Xor),
        Just(Op::Eq),
        Just(Op::Ne),
        Just(Op::Lt),
        Just(Op::Gt),
    ];
    let h = (0u16..6).prop_map(FieldHandle);
    prop_oneof![
        (operand(), operand(), binop, 1u64..3).prop_map(|(a, b, op, v)| vec![
            a,
            b,
            op,
            Op::Abort(v)
        ]),
        (operand(), h).prop_map(|(a, h)| vec![a, Op::PopField(h)]),
        (operand(), 1u64..3).prop_map(|(a, v)| vec![a, Op::Abort(v)]),
        op().prop_map(|o| vec![o]),
    ]
}

proptest! {
    /// Programs made mostly of fusable runs (the layers' filters are): the
    /// compiled closures agree with the interpreter, result and headers.
    #[test]
    fn fused_closures_agree_with_the_interpreter(
        blocks in prop::collection::vec(block(), 0..10),
        ret in 0u64..3,
        seed in prop::collection::vec(any::<u8>(), 32),
        data in prop::collection::vec(any::<u8>(), 0..64).prop_map(|d| Message::from_slice(&d)),
        little in any::<bool>(),
    ) {
        let l = layout();
        let order = if little { ByteOrder::Little } else { ByteOrder::Big };
        let mut ops: Vec<Op> = blocks.concat();
        ops.push(Op::Return(ret));
        let Ok(v) = verify(&ops, &l) else {
            return Ok(());
        };
        let mut a = l.headers();
        for (h, s) in a.iter_mut().zip(&seed) {
            *h = *s;
        }
        let mut b = a.clone();
        let interp = v.run(&l, &mut Frame { hdr: &mut a, order, data: &data });
        let compiled = v.compile(&l).run(&mut Frame { hdr: &mut b, order, data: &data });
        prop_assert_eq!(interp, compiled);
        prop_assert_eq!(&a, &b);
    }
}
