//! Canonical protocol processing (seed 003 §3.1): the form every layer of a
//! PA stack is written in.
//!
//! Sending and delivery are each split in two. *Pre*-processing builds
//! (pre-send) or checks (pre-deliver) this layer's header fields and takes
//! `&self`: it cannot touch protocol state. *Post*-processing updates the
//! state — counts a sequence number, keeps a copy for retransmission — and may
//! emit messages of its own (acknowledgements, retransmissions, fragments,
//! held messages released) and pass a different message up (a reassembled
//! one). Because pre-processing is pure, every layer's pre-processing can run
//! before any layer's post-processing, and post-processing can wait until the
//! message is on the wire or delivered (§4).
//!
//! A layer sees its fields only through the handles [`Layer::declare`] got, so
//! the same code runs with the PA's compact headers (every layer's fields in
//! one [`Layout`]) and without the PA (each layer its own layout and its own
//! header, see [`crate::layered`]).

use std::time::Duration;

use strata_core::{Instant, Message};

use crate::field::{ByteOrder, FieldHandle, Layout, LayoutBuilder};
use crate::filter::Op;

/// Read access to a message's header fields.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The layout the fields were compiled into.
    pub layout: &'a Layout,
    /// The headers' byte order.
    pub order: ByteOrder,
    /// The headers (the four class headers, concatenated).
    pub buf: &'a [u8],
}

impl View<'_> {
    /// A field's value.
    #[inline]
    pub fn get(&self, h: FieldHandle) -> u64 {
        self.layout.get(self.buf, self.order, h)
    }
}

/// Write access to a message's header fields.
pub struct ViewMut<'a> {
    /// The layout the fields were compiled into.
    pub layout: &'a Layout,
    /// The headers' byte order.
    pub order: ByteOrder,
    /// The headers.
    pub buf: &'a mut [u8],
}

impl ViewMut<'_> {
    /// A field's value.
    #[inline]
    pub fn get(&self, h: FieldHandle) -> u64 {
        self.layout.get(self.buf, self.order, h)
    }

    /// Sets a field.
    #[inline]
    pub fn set(&mut self, h: FieldHandle, v: u64) {
        self.layout.set(self.buf, self.order, h, v);
    }
}

/// What pre-send decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The header is built; the message goes on down.
    Pass,
    /// This layer takes the message: it goes no further down now, and this
    /// layer's post-send deals with it (a full window holds it, fragmentation
    /// cuts it).
    Divert,
}

/// What pre-deliver decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The header checks out; the message goes on up.
    Pass,
    /// The message goes no further up now; post-deliver deals with it (an
    /// acknowledgement, a duplicate, a fragment).
    Absorb,
    /// The message is bad and dies here, for this reason.
    Drop(&'static str),
}

/// A message a layer sends by itself, from its position down.
pub struct Emit {
    /// Its headers, in the layout the layer was given; the emitting layer
    /// (and, for a stored message, the layers above) filled their fields.
    pub hdr: Vec<u8>,
    /// Its data.
    pub data: Message,
    /// Unusual (a retransmission): the PA adds the connection identification.
    pub unusual: bool,
}

/// What post-processing and timers ask for.
#[derive(Default)]
pub struct Effects {
    /// Messages to send from below this layer.
    pub down: Vec<Emit>,
    /// A message to pass up in place of the one delivered (a reassembled one).
    pub up: Option<Message>,
    /// Change of the send prediction's disable counter (§3.2).
    pub send_disable: i32,
    /// Change of the delivery prediction's disable counter.
    pub deliver_disable: i32,
    /// When this layer's timer should fire next; `None`: no timer. A layer
    /// with timers states its next one after every call.
    pub timer: Option<Instant>,
    /// This layer's filter fragments changed: rebuild the filters (§3.3).
    pub refilter: bool,
}

/// A connection's predicted headers (§3.2), all four classes each, for
/// layers that keep their fields in them up to date themselves.
pub struct Predicted {
    /// The next send's headers, in this side's order.
    pub send: Vec<u8>,
    /// The next delivery's headers (its protocol-specific class is what
    /// arriving messages are compared with), in the peer's order.
    pub deliver: Vec<u8>,
    /// The peer's byte order.
    pub deliver_order: ByteOrder,
}

/// What a post-processing call gets besides the message.
pub struct Ctx<'a> {
    /// The layout, for headers of emitted messages.
    pub layout: &'a Layout,
    /// The byte order of emitted messages.
    pub order: ByteOrder,
    /// The time.
    pub now: Instant,
    /// What the call asks for.
    pub fx: &'a mut Effects,
    /// The PA's predictions, when there are any (not without the PA).
    pub predicted: Option<&'a mut Predicted>,
}

impl Ctx<'_> {
    /// Writes a field of the send prediction: a layer whose post-processing
    /// changes what its pre-send would write updates the prediction in
    /// place instead of having it rebuilt (§3.2).
    #[inline]
    pub fn predict_send(&mut self, h: FieldHandle, v: u64) {
        if let Some(p) = self.predicted.as_deref_mut() {
            self.layout.set(&mut p.send, self.order, h, v);
        }
    }

    /// Writes a field of the delivery prediction (what
    /// [`Layer::predict_deliver`] would write now).
    #[inline]
    pub fn predict_deliver(&mut self, h: FieldHandle, v: u64) {
        if let Some(p) = self.predicted.as_deref_mut() {
            self.layout.set(&mut p.deliver, p.deliver_order, h, v);
        }
    }

    /// Fresh headers for a message this layer emits.
    pub fn headers(&self) -> Vec<u8> {
        self.layout.headers()
    }

    /// Asks for the timer `after` from now.
    pub fn timer_in(&mut self, after: Duration) {
        self.fx.timer = Some(Instant::from_nanos(
            self.now.as_nanos().saturating_add(after.as_nanos() as u64),
        ));
    }
}

/// A layer in canonical form.
pub trait Layer: Send + 'static {
    /// Its name.
    fn name(&self) -> &'static str;

    /// Declares its fields (§2.1) and keeps the handles.
    fn declare(&mut self, fields: &mut LayoutBuilder);

    /// Pre-send: fill this layer's fields for `data`. No state changes.
    fn pre_send(&self, h: &mut ViewMut, data: &Message) -> Verdict;

    /// Post-send: update state after the message went down (or, when
    /// `diverted`, take it: hold it, cut it). A layer that keeps the data
    /// (for retransmission, held, cut) takes it (`std::mem::take`) rather
    /// than copy it: the message is on its way already, and the layers
    /// below, whose post-sends follow, then see it empty.
    fn post_send(&mut self, h: View, data: &mut Message, diverted: bool, cx: &mut Ctx);

    /// Pre-deliver: check this layer's fields. No state changes.
    fn pre_deliver(&self, h: View, data: &Message) -> Check;

    /// Post-deliver: update state after the message went up (or, when
    /// `absorbed`, deal with it).
    fn post_deliver(&mut self, h: View, data: &Message, absorbed: bool, cx: &mut Ctx);

    /// Whether `post_send` or `post_deliver` ever do anything. A layer that
    /// says false (its state never changes with the messages) is skipped by
    /// post-processing.
    fn post_processes(&self) -> bool {
        true
    }

    /// Whether post-processing of a message that took the fast path (sent
    /// as predicted, not diverted; delivered as predicted, not absorbed)
    /// has anything to do now. Asked before each such post-send and
    /// post-deliver: a layer whose state changes only on the slow path
    /// (a cut or reassembled message, a control op it has yet to adopt)
    /// says false until then, and the PA skips the call (§3.1: only what
    /// the message changed is post-processed).
    fn posts_fast(&self) -> bool {
        true
    }

    /// Whether `post_deliver` reads the data of a message that went up (not
    /// absorbed). When no layer does, the PA hands the data up on the fast
    /// path without keeping a copy for post-processing (which then sees it
    /// empty).
    fn reads_delivered_data(&self) -> bool {
        true
    }

    /// Writes this layer's protocol-specific fields as the next delivery in
    /// order will carry them (§3.2). Layers without such fields do nothing.
    fn predict_deliver(&self, h: &mut ViewMut) {
        let _ = h;
    }

    /// Whether post-processing, timers or control can change what this
    /// layer's pre-send writes for an empty message or what
    /// [`Layer::predict_deliver`] writes. A layer whose predicted fields are
    /// fixed once declared says false: the PA then keeps them instead of
    /// rebuilding them after every post-processing (§3.2). So does a layer
    /// that writes every change into the predictions itself
    /// ([`Ctx::predict_send`], [`Ctx::predict_deliver`]). Pre-send must
    /// write its fields even when it diverts, so that a full rebuild is
    /// right whatever the state.
    fn prediction_varies(&self) -> bool {
        true
    }

    /// Filter operations (no `Return`) that fill this layer's
    /// message-specific fields on the send path, or `Abort` to refuse the
    /// fast path (§3.3).
    fn send_filter(&self) -> Vec<Op> {
        Vec::new()
    }

    /// Filter operations that check this layer's message-specific fields on
    /// the delivery path.
    fn deliver_filter(&self) -> Vec<Op> {
        Vec::new()
    }

    /// The timer asked for in [`Effects::timer`] fired (possibly late, or
    /// stale: a layer checks its own deadline).
    fn on_timer(&mut self, cx: &mut Ctx) {
        let _ = cx;
    }

    /// Whether the connection identification in `h` names this layer's
    /// connection (the PA finds a connection by it, §2.2). Layers without
    /// identification fields accept anything.
    fn accepts_ident(&self, h: View) -> bool {
        let _ = h;
        true
    }

    /// A control operation for this layer (`Control::Private` on the PA or
    /// on the layer's protocol); true when this layer took it. A change it
    /// makes to state takes effect in its next post-processing.
    fn control(&mut self, op: &(dyn std::any::Any + Send)) -> bool {
        let _ = op;
        false
    }

    /// Counters worth reporting, by name.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A protocol's `control` for its layers: a `Control::Private` op on a
/// session goes to that session's layers (`layers` finds them), the first
/// that takes it answers.
pub(crate) fn control_layers<'a, I>(
    sess: Option<strata_core::SessionId>,
    op: &strata_core::Control,
    layers: impl FnOnce(strata_core::SessionId) -> Option<I>,
) -> Result<strata_core::Reply, strata_core::UpiError>
where
    I: Iterator<Item = &'a mut Box<dyn Layer>>,
{
    use strata_core::{Control, Reply, UpiError};
    let (Some(sess), Control::Private(op)) = (sess, op) else {
        return Err(UpiError::Unsupported(op.name()));
    };
    let mut layers = layers(sess).ok_or(UpiError::Unsupported("no such session"))?;
    if layers.any(|l| l.control(op.as_ref())) {
        Ok(Reply::Done)
    } else {
        Err(UpiError::Unsupported("private control"))
    }
}
