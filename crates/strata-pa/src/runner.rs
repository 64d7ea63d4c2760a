//! The layers of one connection run in canonical order over one layout:
//! what the PA does when its prediction or its filter says no (§4, Figure 3:
//! `to_protocol_stack(PRESEND | PREDELIVER | POSTSEND | POSTDELIVER)`).
//!
//! Layers are numbered from the top. A send runs every layer's pre-send from
//! the top down until one diverts the message; the message goes to the
//! network if none did; then the post-sends run. A delivery runs pre-deliver
//! from the bottom up until a layer absorbs or drops it; the data goes to
//! the application if all passed; then the post-delivers run. What
//! post-processing emits is sent from below the emitting layer; what it
//! passes up in place of the message (a reassembled one) goes on up from
//! above it.

use strata_core::{Instant, Message};

use crate::field::{ByteOrder, FieldHandle, Layout};
use crate::layer::{Check, Ctx, Effects, Layer, Predicted, Verdict, View, ViewMut};

/// A message ready for the network: its headers and data.
pub struct Frame {
    /// The four class headers.
    pub hdr: Vec<u8>,
    /// The data.
    pub data: Message,
    /// A retransmission or other unusual message (§2.2).
    pub unusual: bool,
}

/// What a run produced.
#[derive(Default)]
pub struct Output {
    /// Messages for the network, in order.
    pub frames: Vec<Frame>,
    /// Data for the application, in order.
    pub up: Vec<Message>,
    /// Why messages were dropped.
    pub drops: Vec<&'static str>,
}

impl Output {
    /// Nothing to send, hand up or count (post-processing's common case).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.up.is_empty() && self.drops.is_empty()
    }
}

/// The layers of a connection and what the PA keeps for them.
pub struct Runner {
    /// The layers, top first.
    pub layers: Vec<Box<dyn Layer>>,
    /// The compiled layout of all their fields.
    pub layout: Layout,
    /// The order this side writes.
    pub order: ByteOrder,
    /// Each layer's share of the send prediction's disable counter (§3.2).
    pub send_disable: Vec<i32>,
    /// Each layer's share of the delivery prediction's disable counter.
    pub deliver_disable: Vec<i32>,
    /// Each layer's timer.
    pub timers: Vec<Option<Instant>>,
    /// A layer's timer changed since the PA last looked.
    pub timers_moved: bool,
    /// A layer asked for its filters to be rebuilt.
    pub refilter: bool,
    /// Fields outside the layers (the PA's own: `cookie`, `echo`,
    /// `cookie-ack`) and their values, written into every message before
    /// the layers pre-send it: before `check` computes the checksum that
    /// covers them.
    pub preset: Vec<(FieldHandle, u64)>,
    /// The connection's predictions, which layers may update in place.
    pub predicted: Predicted,
    /// Each layer's [`Layer::post_processes`].
    posts: Vec<bool>,
    /// What the fast path's post-processing calls ask for, one at a time.
    fx: Effects,
    /// Messages they emitted, to run through the layers below them.
    work: Vec<Work>,
}

enum Work {
    Send {
        from: usize,
        frame: Frame,
    },
    Deliver {
        /// The layer the message is at (it has passed the ones below).
        at: usize,
        hdr: Vec<u8>,
        /// The order of `hdr` (the peer's).
        order: ByteOrder,
        data: Message,
    },
}

impl Runner {
    /// A runner over `layers` (top first) whose fields compiled into `layout`.
    pub fn new(layers: Vec<Box<dyn Layer>>, layout: Layout, order: ByteOrder) -> Runner {
        let n = layers.len();
        let posts = layers.iter().map(|l| l.post_processes()).collect();
        Runner {
            posts,
            layers,
            layout,
            order,
            send_disable: vec![0; n],
            deliver_disable: vec![0; n],
            timers: vec![None; n],
            timers_moved: false,
            refilter: false,
            preset: Vec::new(),
            fx: Effects::default(),
            work: Vec::new(),
            predicted: Predicted {
                send: Vec::new(),
                deliver: Vec::new(),
                deliver_order: order,
            },
        }
    }

    /// The send prediction is enabled.
    pub fn send_enabled(&self) -> bool {
        self.send_disable.iter().sum::<i32>() <= 0
    }

    /// The delivery prediction is enabled.
    pub fn deliver_enabled(&self) -> bool {
        self.deliver_disable.iter().sum::<i32>() <= 0
    }

    fn set_timer(&mut self, i: usize, t: Option<Instant>) {
        if self.timers[i] != t {
            self.timers[i] = t;
            self.timers_moved = true;
        }
    }

    /// The earliest layer timer.
    pub fn next_timer(&self) -> Option<Instant> {
        self.timers.iter().flatten().min().copied()
    }

    fn apply(
        &mut self,
        i: usize,
        fx: Effects,
        work: &mut Vec<Work>,
        above: Option<(&[u8], ByteOrder)>,
    ) {
        self.send_disable[i] += fx.send_disable;
        self.deliver_disable[i] += fx.deliver_disable;
        self.set_timer(i, fx.timer);
        self.refilter |= fx.refilter;
        if fx.down.is_empty() && fx.up.is_none() {
            // The common case of post-processing: nothing emitted.
            return;
        }
        // Emitted messages go down from below the layer, in order (the work
        // list is a stack, so push them last first).
        for e in fx.down.into_iter().rev() {
            work.push(Work::Send {
                from: i + 1,
                frame: Frame {
                    hdr: e.hdr,
                    data: e.data,
                    unusual: e.unusual,
                },
            });
        }
        if let (Some(up), Some((hdr, order))) = (fx.up, above) {
            work.push(Work::Deliver {
                at: i,
                hdr: hdr.to_vec(),
                order,
                data: up,
            });
        }
    }

    /// Sends `data` through all layers (the slow path).
    pub fn send(&mut self, data: Message, now: Instant, out: &mut Output) {
        let hdr = self.layout.headers();
        self.run(
            vec![Work::Send {
                from: 0,
                frame: Frame {
                    hdr,
                    data,
                    unusual: false,
                },
            }],
            now,
            out,
        );
    }

    /// Whether some layer's post-deliver reads the data of a message that
    /// went up ([`Layer::reads_delivered_data`]).
    pub fn reads_delivered_data(&self) -> bool {
        self.layers
            .iter()
            .zip(&self.posts)
            .any(|(l, p)| *p && l.reads_delivered_data())
    }

    /// Takes what the post-processing call just made asked for (in
    /// `self.fx`), and readies `fx` for the next: the common case (nothing
    /// emitted, nothing passed up) costs a few additions; what was emitted
    /// waits in `self.work`.
    fn take_fx(&mut self, i: usize, above: Option<(&[u8], ByteOrder)>) {
        let fx = &mut self.fx;
        if fx.down.is_empty() && fx.up.is_none() {
            self.send_disable[i] += std::mem::take(&mut fx.send_disable);
            self.deliver_disable[i] += std::mem::take(&mut fx.deliver_disable);
            let t = fx.timer.take();
            self.refilter |= std::mem::take(&mut fx.refilter);
            self.set_timer(i, t);
        } else {
            let fx = std::mem::take(&mut self.fx);
            let mut work = std::mem::take(&mut self.work);
            self.apply(i, fx, &mut work, above);
            self.work = work;
        }
    }

    /// Post-send of a message the PA sent on the fast path with `hdr`; a
    /// layer may take `data` (it keeps it for retransmission).
    pub fn post_send(&mut self, hdr: &[u8], data: &mut Message, now: Instant, out: &mut Output) {
        self.post_all((hdr, self.order), Ok(data), now, out);
    }

    /// Every layer's post-send (top down) or post-deliver (bottom up) of a
    /// message that took the fast path; layers without post-processing, or
    /// with none to do for it ([`Layer::posts_fast`]), are skipped, and one
    /// `Effects` serves them all.
    fn post_all(
        &mut self,
        (hdr, order): (&[u8], ByteOrder),
        mut data: Result<&mut Message, &Message>,
        now: Instant,
        out: &mut Output,
    ) {
        let n = self.layers.len();
        let send = data.is_ok();
        let above = (!send).then_some((hdr, order));
        // One `Effects` and one work list kept in the runner serve every
        // call: nothing to build or drop per message.
        for k in 0..n {
            let i = if send { k } else { n - 1 - k };
            if !self.posts[i] || !self.layers[i].posts_fast() {
                continue;
            }
            let mut cx = Ctx {
                layout: &self.layout,
                order: self.order,
                now,
                fx: &mut self.fx,
                predicted: Some(&mut self.predicted),
            };
            let v = View {
                layout: &self.layout,
                order,
                buf: hdr,
            };
            match &mut data {
                Ok(d) => self.layers[i].post_send(v, d, false, &mut cx),
                Err(d) => self.layers[i].post_deliver(v, d, false, &mut cx),
            }
            self.take_fx(i, above);
        }
        if !self.work.is_empty() {
            let work = std::mem::take(&mut self.work);
            self.run(work, now, out);
        }
    }

    /// Delivers a message with headers `hdr`, written in `order`, through
    /// all layers (the slow path).
    pub fn deliver(
        &mut self,
        hdr: Vec<u8>,
        order: ByteOrder,
        data: Message,
        now: Instant,
        out: &mut Output,
    ) {
        let at = self.layers.len();
        self.run(
            vec![Work::Deliver {
                at,
                hdr,
                order,
                data,
            }],
            now,
            out,
        );
    }

    /// Post-deliver of a message the PA delivered on the fast path.
    pub fn post_deliver(
        &mut self,
        hdr: &[u8],
        order: ByteOrder,
        data: &Message,
        now: Instant,
        out: &mut Output,
    ) {
        self.post_all((hdr, order), Err(data), now, out);
    }

    /// Runs the layers' timers that are due.
    pub fn on_timer(&mut self, now: Instant, out: &mut Output) {
        let mut work = Vec::new();
        for i in 0..self.layers.len() {
            if self.timers[i].is_some_and(|t| t <= now) {
                let mut fx = Effects::default();
                let mut cx = Ctx {
                    layout: &self.layout,
                    order: self.order,
                    now,
                    fx: &mut fx,
                    predicted: Some(&mut self.predicted),
                };
                self.layers[i].on_timer(&mut cx);
                self.apply(i, fx, &mut work, None);
            }
        }
        self.run(work, now, out);
    }

    /// One layer's post-send (`Ok(data)`) or post-deliver (`Err(data)`).
    fn post(
        &mut self,
        i: usize,
        (hdr, order): (&[u8], ByteOrder),
        data: Result<&mut Message, &Message>,
        flag: bool,
        now: Instant,
        fx: &mut Effects,
    ) {
        let mut cx = Ctx {
            layout: &self.layout,
            order: self.order,
            now,
            fx,
            predicted: Some(&mut self.predicted),
        };
        let v = View {
            layout: &self.layout,
            order,
            buf: hdr,
        };
        match data {
            Ok(data) => self.layers[i].post_send(v, data, flag, &mut cx),
            Err(data) => self.layers[i].post_deliver(v, data, flag, &mut cx),
        }
    }

    fn run(&mut self, mut work: Vec<Work>, now: Instant, out: &mut Output) {
        let n = self.layers.len();
        while let Some(w) = work.pop() {
            match w {
                Work::Send { from, mut frame } => {
                    for &(h, v) in &self.preset {
                        self.layout.set(&mut frame.hdr, self.order, h, v);
                    }
                    let mut stop = n;
                    for i in from..n {
                        let mut v = ViewMut {
                            layout: &self.layout,
                            order: self.order,
                            buf: &mut frame.hdr,
                        };
                        if self.layers[i].pre_send(&mut v, &frame.data) == Verdict::Divert {
                            stop = i;
                            break;
                        }
                    }
                    let mut later = Vec::new();
                    // A layer's post-send may take the data: a sent frame
                    // keeps its own.
                    let mut data = if stop == n {
                        frame.data.clone()
                    } else {
                        std::mem::take(&mut frame.data)
                    };
                    for i in from..n.min(stop + 1) {
                        let mut fx = Effects::default();
                        let at = (&frame.hdr[..], self.order);
                        self.post(i, at, Ok(&mut data), i == stop, now, &mut fx);
                        self.apply(i, fx, &mut later, None);
                    }
                    if stop == n {
                        out.frames.push(frame);
                    }
                    work.extend(later);
                }
                Work::Deliver {
                    at,
                    hdr,
                    order,
                    data,
                } => {
                    let mut stop = None;
                    for i in (0..at).rev() {
                        let v = View {
                            layout: &self.layout,
                            order,
                            buf: &hdr,
                        };
                        match self.layers[i].pre_deliver(v, &data) {
                            Check::Pass => {}
                            Check::Absorb => {
                                stop = Some(i);
                                break;
                            }
                            Check::Drop(why) => {
                                out.drops.push(why);
                                stop = Some(usize::MAX);
                                break;
                            }
                        }
                    }
                    if stop == Some(usize::MAX) {
                        continue;
                    }
                    let low = stop.unwrap_or(0);
                    if stop.is_none() {
                        out.up.push(data.clone());
                    }
                    let mut later = Vec::new();
                    for i in (low..at).rev() {
                        let mut fx = Effects::default();
                        let flag = Some(i) == stop;
                        self.post(i, (&hdr, order), Err(&data), flag, now, &mut fx);
                        self.apply(i, fx, &mut later, Some((&hdr, order)));
                    }
                    work.extend(later);
                }
            }
        }
    }
}
