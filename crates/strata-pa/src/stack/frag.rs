//! `frag`: fragmentation and reassembly (seed 003 §6). The PA does not cut
//! messages: the send filter refuses one larger than a fragment (`ABORT`),
//! so it goes through the layers, and this layer's post-send cuts it. Each
//! fragment carries the protocol-specific `frag` bit, which the receiver's
//! prediction never has, so fragments go through the layers there too and
//! this layer reassembles them. The layer below delivers in order, so a
//! message's fragments arrive one after the other.

use strata_core::Message;

use crate::field::{Class, FieldHandle, LayoutBuilder};
use crate::filter::Op;
use crate::layer::{Check, Ctx, Emit, Layer, Verdict, View, ViewMut};

/// The fragmentation layer.
pub struct Frag {
    max: usize,
    limit: usize,
    h: Option<(FieldHandle, FieldHandle)>,
    reassembly: Option<Message>,
    cut: u64,
    joined: u64,
    oversize: u64,
}

impl Frag {
    /// Fragments of at most `max` bytes; reassembled messages of at most
    /// `limit` bytes (longer ones are dropped and counted).
    pub fn new(max: usize, limit: usize) -> Frag {
        Frag {
            max: max.max(1),
            limit,
            h: None,
            reassembly: None,
            cut: 0,
            joined: 0,
            oversize: 0,
        }
    }
}

impl Layer for Frag {
    fn name(&self) -> &'static str {
        "frag"
    }

    fn declare(&mut self, f: &mut LayoutBuilder) {
        self.h = Some((
            f.add_field(Class::Protocol, "frag", 1, None),
            f.add_field(Class::Message, "last", 1, None),
        ));
    }

    fn pre_send(&self, h: &mut ViewMut, data: &Message) -> Verdict {
        if data.len() > self.max {
            return Verdict::Divert;
        }
        if let Some((frag, last)) = self.h {
            h.set(frag, 0);
            h.set(last, 0);
        }
        Verdict::Pass
    }

    fn post_send(&mut self, h: View, data: &Message, diverted: bool, cx: &mut Ctx) {
        let (true, Some((frag, last))) = (diverted, self.h) else {
            return;
        };
        self.cut += 1;
        let mut rest = data.clone();
        while !rest.is_empty() {
            let tail = if rest.len() > self.max {
                rest.split_off(self.max)
            } else {
                Message::new()
            };
            let mut hdr = h.buf.to_vec();
            cx.layout.set(&mut hdr, cx.order, frag, 1);
            cx.layout
                .set(&mut hdr, cx.order, last, u64::from(tail.is_empty()));
            cx.fx.down.push(Emit {
                hdr,
                data: std::mem::replace(&mut rest, tail),
                unusual: false,
            });
        }
    }

    fn pre_deliver(&self, h: View, _: &Message) -> Check {
        match self.h {
            Some((frag, _)) if h.get(frag) == 1 => Check::Absorb,
            _ => Check::Pass,
        }
    }

    fn post_deliver(&mut self, h: View, data: &Message, absorbed: bool, cx: &mut Ctx) {
        let (true, Some((_, last))) = (absorbed, self.h) else {
            return;
        };
        let whole = match self.reassembly.take() {
            Some(mut m) => {
                m.join(data.clone());
                m
            }
            None => data.clone(),
        };
        if whole.len() > self.limit {
            self.oversize += 1;
            return;
        }
        if h.get(last) == 1 {
            self.joined += 1;
            cx.fx.up = Some(whole);
        } else {
            self.reassembly = Some(whole);
        }
    }

    /// Refuses the fast path for a message that needs cutting.
    fn send_filter(&self) -> Vec<Op> {
        vec![
            Op::PushSize,
            Op::PushConstant(self.max as u64),
            Op::Gt,
            Op::Abort(1),
        ]
    }

    fn predict_deliver(&self, h: &mut ViewMut) {
        if let Some((frag, _)) = self.h {
            h.set(frag, 0);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("cut", self.cut),
            ("joined", self.joined),
            ("oversize", self.oversize),
        ]
    }
}
