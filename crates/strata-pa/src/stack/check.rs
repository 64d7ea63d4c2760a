//! `check`: an Internet checksum over the data (RFC 1071). The checksum is
//! message-specific (§2.1): with the PA, the send filter computes it with
//! `DIGEST` and the delivery filter checks it, so the layer itself is not
//! entered on the fast path (§3.3).

use strata_core::Message;

use crate::field::{Class, FieldHandle, LayoutBuilder};
use crate::filter::{Cover, Digest, Op};
use crate::layer::{Check, Ctx, Layer, Verdict, View, ViewMut};

/// The checksum layer.
#[derive(Default)]
pub struct Check16 {
    sum: Option<FieldHandle>,
}

/// The Internet checksum of the four headers in `hdr` (`sum` read as zero)
/// and of the data, as the filter's `DIGEST` computes it. Without the PA
/// the layer's own layout holds `sum` alone, and the layers above have
/// their headers in the data.
pub fn sum_of(sum: FieldHandle, h: View, data: &Message) -> u64 {
    let d = Digest::Sum16(sum);
    d.of(&Cover::new(h.layout, d), h.buf, h.order, data)
}

impl Layer for Check16 {
    fn name(&self) -> &'static str {
        "check"
    }

    fn declare(&mut self, f: &mut LayoutBuilder) {
        self.sum = Some(f.add_field(Class::Message, "sum", 16, None));
    }

    /// The checksum of an empty message is fixed; filters fill the real one.
    fn prediction_varies(&self) -> bool {
        false
    }

    fn pre_send(&self, h: &mut ViewMut, data: &Message) -> Verdict {
        if let Some(sum) = self.sum {
            let v = sum_of(
                sum,
                View {
                    layout: h.layout,
                    order: h.order,
                    buf: h.buf,
                },
                data,
            );
            h.set(sum, v);
        }
        Verdict::Pass
    }

    fn post_send(&mut self, _: View, _: &mut Message, _: bool, _: &mut Ctx) {}

    fn pre_deliver(&self, h: View, data: &Message) -> Check {
        match self.sum {
            Some(sum) if h.get(sum) == sum_of(sum, h, data) => Check::Pass,
            _ => Check::Drop("checksum"),
        }
    }

    fn post_deliver(&mut self, _: View, _: &Message, _: bool, _: &mut Ctx) {}

    fn post_processes(&self) -> bool {
        false
    }

    fn send_filter(&self) -> Vec<Op> {
        self.sum
            .map(|sum| vec![Op::Digest(Digest::Sum16(sum)), Op::PopField(sum)])
            .unwrap_or_default()
    }

    fn deliver_filter(&self) -> Vec<Op> {
        self.sum
            .map(|sum| {
                vec![
                    Op::PushField(sum),
                    Op::Digest(Digest::Sum16(sum)),
                    Op::Ne,
                    Op::Abort(2),
                ]
            })
            .unwrap_or_default()
    }
}
