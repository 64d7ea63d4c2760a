//! Random sequences of message operations agree with a plain `Vec<u8>` model.

use bytes::Bytes;
use proptest::prelude::*;
use strata_core::Message;

#[derive(Clone, Debug)]
enum Op {
    Push(Vec<u8>),
    Append(Vec<u8>),
    Strip(usize),
    Truncate(usize),
    SplitKeepFront(usize),
    SplitKeepBack(usize),
    SplitAndJoin(usize),
    Pullup(usize),
    CloneAndMutate,
}

fn op() -> impl Strategy<Value = Op> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        bytes().prop_map(Op::Push),
        bytes().prop_map(Op::Append),
        (0usize..400).prop_map(Op::Strip),
        (0usize..400).prop_map(Op::Truncate),
        (0usize..400).prop_map(Op::SplitKeepFront),
        (0usize..400).prop_map(Op::SplitKeepBack),
        (0usize..400).prop_map(Op::SplitAndJoin),
        (0usize..400).prop_map(Op::Pullup),
        Just(Op::CloneAndMutate),
    ]
}

fn apply(m: &mut Message, model: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Push(h) => {
            m.push_slice(h);
            model.splice(0..0, h.iter().copied());
        }
        Op::Append(b) => {
            m.append_bytes(Bytes::from(b.clone()));
            model.extend_from_slice(b);
        }
        Op::Strip(n) => {
            let ok = m.strip(*n);
            assert_eq!(ok, *n <= model.len());
            if ok {
                model.drain(..*n);
            }
        }
        Op::Truncate(n) => {
            m.truncate(*n);
            model.truncate(*n);
        }
        Op::SplitKeepFront(at) => {
            let tail = m.split_off(*at);
            let cut = (*at).min(model.len());
            assert_eq!(tail.to_vec(), model[cut..].to_vec());
            model.truncate(cut);
        }
        Op::SplitKeepBack(at) => {
            let tail = m.split_off(*at);
            let cut = (*at).min(model.len());
            assert_eq!(m.to_vec(), model[..cut].to_vec());
            *m = tail;
            model.drain(..cut);
        }
        Op::SplitAndJoin(at) => {
            let tail = m.split_off(*at);
            m.join(tail);
        }
        Op::Pullup(n) => {
            let got = m.pullup(*n).map(<[u8]>::to_vec);
            if *n <= model.len() {
                assert_eq!(got.as_deref(), Some(&model[..*n]));
            } else {
                assert_eq!(got, None);
            }
        }
        Op::CloneAndMutate => {
            let mut copy = m.clone();
            copy.for_each_chunk_mut(|c| c.iter_mut().for_each(|b| *b = b.wrapping_add(1)));
            let bumped: Vec<u8> = model.iter().map(|b| b.wrapping_add(1)).collect();
            assert_eq!(copy.to_vec(), bumped);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn message_operations_agree_with_a_vec(
        start in proptest::collection::vec(any::<u8>(), 0..600),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let mut m = Message::from_slice(&start);
        let mut model = start.clone();
        for op in &ops {
            apply(&mut m, &mut model, op);
            prop_assert_eq!(m.len(), model.len());
            prop_assert_eq!(m.to_vec(), model.clone());
            let chunked: usize = m.chunks().map(<[u8]>::len).sum();
            prop_assert_eq!(chunked, model.len());
            prop_assert!(m.chunks().all(|c| !c.is_empty()), "no empty chunks");
            let mut probe = vec![0u8; 17];
            let off = model.len() / 2;
            let n = m.copy_to_slice(off, &mut probe);
            prop_assert_eq!(&probe[..n], &model[off..(off + 17).min(model.len())]);
            if let Some(first) = m.chunks().next() {
                prop_assert_eq!(m.contiguous_at(0), first);
            }
        }
        prop_assert_eq!(m.into_bytes().to_vec(), model);
    }
}
