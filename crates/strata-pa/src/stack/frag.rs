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

/// A control operation: cut messages into fragments of at most this many
/// bytes from now on (say, after the path's MTU changed). The send filter,
/// which refuses larger messages the fast path, is rewritten when the layer's
/// next post-processing adopts the size (§3.3).
#[derive(Clone, Copy, Debug)]
pub struct SetFragment(pub usize);

/// The fragmentation layer.
pub struct Frag {
    max: usize,
    /// A size asked for, adopted by the next post-processing.
    next_max: Option<usize>,
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
            next_max: None,
            limit,
            h: None,
            reassembly: None,
            cut: 0,
            joined: 0,
            oversize: 0,
        }
    }
}

impl Frag {
    /// Adopts a fragment size asked for; the send filter depends on it.
    fn adopt(&mut self, cx: &mut Ctx) {
        if let Some(max) = self.next_max.take() {
            self.max = max.max(1);
            cx.fx.refilter = true;
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

    /// A whole message's fragment bits are always zero (a new fragment
    /// size changes the filter, not the prediction).
    fn prediction_varies(&self) -> bool {
        false
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

    fn post_send(&mut self, h: View, data: &mut Message, diverted: bool, cx: &mut Ctx) {
        self.adopt(cx);
        let (true, Some((frag, last))) = (diverted, self.h) else {
            return;
        };
        self.cut += 1;
        let mut rest = std::mem::take(data);
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

    /// A whole message sent or delivered as predicted changes nothing here
    /// but a fragment size waiting to be adopted.
    fn posts_fast(&self) -> bool {
        self.next_max.is_some()
    }

    /// Only an absorbed fragment's data is read.
    fn reads_delivered_data(&self) -> bool {
        false
    }

    fn pre_deliver(&self, h: View, _: &Message) -> Check {
        match self.h {
            Some((frag, _)) if h.get(frag) == 1 => Check::Absorb,
            _ => Check::Pass,
        }
    }

    fn post_deliver(&mut self, h: View, data: &Message, absorbed: bool, cx: &mut Ctx) {
        self.adopt(cx);
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

    fn control(&mut self, op: &(dyn std::any::Any + Send)) -> bool {
        match op.downcast_ref::<SetFragment>() {
            Some(SetFragment(max)) => {
                self.next_max = Some(*max);
                true
            }
            None => false,
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
