//! Packet filters on the send and the delivery path (seed 003 §3.3, Table 2).
//!
//! A filter is a program for a small stack machine with no loops and no
//! jumps, built by the layers at run time. [`verify`] checks a program once —
//! every field handle valid in the layout, the stack never under- or
//! overflowing, a `Return` at the end — and computes its stack depth; a
//! [`Verified`] program then cannot fail at run time except by its own
//! `Return`/`Abort`. It runs either interpreted ([`Verified::run`]) or
//! compiled to a chain of closures ([`Compiled`], the approach the paper
//! meant to adopt), which resolves field positions and constants once.
//!
//! A filter returns 0 when the fast path may be taken; anything else sends
//! the message through the layers.

use std::sync::Arc;

use strata_core::Message;
use strata_core::checksum::Checksum;
use thiserror::Error;

use crate::field::{ByteOrder, Class, FieldHandle, Layout, Spot, write_bits};

/// A message digest a filter can push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Digest {
    /// The Internet checksum (RFC 1071) of all four headers — the
    /// connection identification (sent or not: the receiver fills in what
    /// it knows), protocol-specific, message-specific and gossip — with the
    /// named field (where the sum goes) read as zero, and of the message's
    /// data: what a checksum layer below the others covers in a layered
    /// stack, where their headers are part of its data (a flipped sequence
    /// number must not pass, nor a changed acknowledgement, which rides as
    /// gossip, nor a changed identification or cookie).
    Sum16(FieldHandle),
}

/// What a digest covers in the four headers: all of them (adjacent), and
/// the field read as zero (absolute bit, width), resolved from a layout once.
#[derive(Clone, Debug)]
pub struct Cover {
    bytes: std::ops::Range<usize>,
    zero: (u32, u32),
}

impl Cover {
    /// What `d` covers in headers of `layout`.
    pub fn new(layout: &Layout, d: Digest) -> Cover {
        let Digest::Sum16(h) = d;
        Cover {
            bytes: layout.class_range(Class::ConnId).start..layout.class_range(Class::Gossip).end,
            zero: layout.position(h).unwrap_or((0, 0)),
        }
    }
}

impl Digest {
    /// The digest of the headers `hdr` (in `order`) as `cover` says, and of
    /// `data`. Headers too short count as empty.
    pub fn of(self, cover: &Cover, hdr: &[u8], order: ByteOrder, data: &Message) -> u64 {
        let Digest::Sum16(_) = self;
        let mut c = Checksum::new();
        let (start, end) = (cover.bytes.start, cover.bytes.end);
        let hdr = if hdr.len() >= end { &hdr[..end] } else { &[] };
        let (bit, bits) = cover.zero;
        let (a, b) = (bit as usize / 8, (bit + bits).div_ceil(8) as usize);
        if bits > 0 && a >= start && b <= hdr.len() {
            // The field's bytes, the field cleared: at most nine (all of
            // them zero when the field is whole bytes, as `check`'s is).
            let whole = bit.is_multiple_of(8) && bits.is_multiple_of(8);
            c.add(&hdr[start..a]);
            if !whole || !(b - a).is_multiple_of(2) {
                let mut w = [0u8; 9];
                let w = &mut w[..b - a];
                if !whole {
                    w.copy_from_slice(&hdr[a..b]);
                    write_bits(w, order, bit % 8, bits, 0);
                }
                c.add(w);
            }
            // (An even number of zero bytes adds nothing and leaves the
            // words after them where they were: skipped.)
            c.add(&hdr[b..]);
        } else {
            c.add(hdr.get(start..).unwrap_or_default());
        }
        for chunk in data.chunks() {
            c.add(chunk);
        }
        u64::from(c.finish())
    }
}

/// One operation of Table 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Push an integer.
    PushConstant(u64),
    /// Push a field of the headers.
    PushField(FieldHandle),
    /// Push the size of the message's data.
    PushSize,
    /// Push a digest of the message's data.
    Digest(Digest),
    /// Pop the top into a field (the send filter fills headers this way).
    PopField(FieldHandle),
    /// Pop two, push their wrapping sum.
    Add,
    /// Pop two, push second minus top (wrapping).
    Sub,
    /// Pop two, push their bitwise and.
    And,
    /// Pop two, push their bitwise or.
    Or,
    /// Pop two, push their exclusive or.
    Xor,
    /// Pop two, push 1 if equal, else 0.
    Eq,
    /// Pop two, push 1 if different, else 0.
    Ne,
    /// Pop two, push 1 if second < top, else 0.
    Lt,
    /// Pop two, push 1 if second > top, else 0.
    Gt,
    /// Return this value.
    Return(u64),
    /// Pop; if non-zero, return this value.
    Abort(u64),
}

/// The deepest stack a filter may use.
pub const MAX_DEPTH: usize = 16;
/// The longest filter program.
pub const MAX_OPS: usize = 256;

/// Why a program was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum VerifyError {
    /// An operation pops more than the stack holds.
    #[error("operation {0} pops an empty stack")]
    Underflow(usize),
    /// An operation pushes beyond [`MAX_DEPTH`].
    #[error("operation {0} overflows the stack")]
    Overflow(usize),
    /// A field handle is not in the layout.
    #[error("operation {0} names no field of the layout")]
    BadField(usize),
    /// The program can end without `Return`.
    #[error("the program does not end with Return")]
    NoReturn,
    /// More than [`MAX_OPS`] operations.
    #[error("the program is too long")]
    TooLong,
}

/// What a filter runs on: the four headers, their order, and the message data.
pub struct Frame<'a> {
    /// The four class headers, concatenated.
    pub hdr: &'a mut [u8],
    /// Their byte order.
    pub order: ByteOrder,
    /// The message's data.
    pub data: &'a Message,
}

/// A program that passed [`verify`].
#[derive(Clone, Debug)]
pub struct Verified {
    ops: Vec<Op>,
    depth: usize,
}

/// Checks `ops` against `layout`.
pub fn verify(ops: &[Op], layout: &Layout) -> Result<Verified, VerifyError> {
    if ops.len() > MAX_OPS {
        return Err(VerifyError::TooLong);
    }
    let mut depth = 0usize;
    let mut max = 0usize;
    for (i, op) in ops.iter().enumerate() {
        let (pops, pushes) = match *op {
            Op::PushField(h) | Op::PopField(h) | Op::Digest(Digest::Sum16(h))
                if !layout.is_valid(h) =>
            {
                return Err(VerifyError::BadField(i));
            }
            Op::PushConstant(_) | Op::PushSize | Op::Digest(_) | Op::PushField(_) => (0, 1),
            Op::PopField(_) | Op::Abort(_) => (1, 0),
            Op::Return(_) => {
                return Ok(Verified {
                    ops: ops[..=i].to_vec(),
                    depth: max,
                });
            }
            _ => (2, 1),
        };
        depth = depth.checked_sub(pops).ok_or(VerifyError::Underflow(i))? + pushes;
        if depth > MAX_DEPTH {
            return Err(VerifyError::Overflow(i));
        }
        max = max.max(depth);
    }
    Err(VerifyError::NoReturn)
}

fn binop(op: Op, a: u64, b: u64) -> u64 {
    match op {
        Op::Add => a.wrapping_add(b),
        Op::Sub => a.wrapping_sub(b),
        Op::And => a & b,
        Op::Or => a | b,
        Op::Xor => a ^ b,
        Op::Eq => u64::from(a == b),
        Op::Ne => u64::from(a != b),
        Op::Lt => u64::from(a < b),
        Op::Gt => u64::from(a > b),
        _ => 0,
    }
}

/// A stack of at most [`MAX_DEPTH`] entries; verified programs never pop it
/// empty or push it full, and if they did, it would read 0 and ignore the push.
struct Stack {
    v: [u64; MAX_DEPTH],
    n: usize,
}

impl Stack {
    #[inline]
    fn push(&mut self, x: u64) {
        if let Some(slot) = self.v.get_mut(self.n) {
            *slot = x;
            self.n += 1;
        }
    }
    #[inline]
    fn pop(&mut self) -> u64 {
        self.n = self.n.saturating_sub(1);
        self.v.get(self.n).copied().unwrap_or(0)
    }
}

impl Verified {
    /// The operations.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The deepest the stack gets.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Interprets the program on `f`.
    pub fn run(&self, layout: &Layout, f: &mut Frame) -> u64 {
        let mut s = Stack {
            v: [0; MAX_DEPTH],
            n: 0,
        };
        for &op in &self.ops {
            match op {
                Op::PushConstant(c) => s.push(c),
                Op::PushField(h) => s.push(layout.get(f.hdr, f.order, h)),
                Op::PushSize => s.push(f.data.len() as u64),
                Op::Digest(d) => s.push(d.of(&Cover::new(layout, d), f.hdr, f.order, f.data)),
                Op::PopField(h) => {
                    let v = s.pop();
                    layout.set(f.hdr, f.order, h, v);
                }
                Op::Return(v) => return v,
                Op::Abort(v) => {
                    if s.pop() != 0 {
                        return v;
                    }
                }
                _ => {
                    let b = s.pop();
                    let a = s.pop();
                    s.push(binop(op, a, b));
                }
            }
        }
        0
    }

    /// Compiles the program to closures over `layout`. Common sequences
    /// become one closure each, which uses no stack: an operand compared
    /// with another and aborted on (`PUSH a, PUSH b, op, ABORT`), an operand
    /// popped into a field (`PUSH a, POP_FIELD`), an operand aborted on.
    /// Each leaves the stack as it found it, so fusing them anywhere in a
    /// verified program changes nothing but the work done.
    pub fn compile(&self, layout: &Layout) -> Compiled {
        let mut steps: Vec<Step> = Vec::new();
        let mut ops = &self.ops[..];
        while let Some(&first) = ops.first() {
            let (step, used) = fused(ops, layout).unwrap_or_else(|| (single(first, layout), 1));
            steps.push(step);
            ops = &ops[used..];
        }
        Compiled {
            steps: Arc::from(steps),
        }
    }
}

/// An operation that pushes one value and reads nothing from the stack.
#[derive(Clone)]
enum Operand {
    Const(u64),
    Size,
    Field(Spot),
    Digest(Digest, Cover),
}

impl Operand {
    fn of(op: Op, layout: &Layout) -> Option<Operand> {
        let spot = |h| field_spot(layout, h);
        Some(match op {
            Op::PushConstant(c) => Operand::Const(c),
            Op::PushSize => Operand::Size,
            Op::PushField(h) => Operand::Field(spot(h)),
            Op::Digest(d) => Operand::Digest(d, Cover::new(layout, d)),
            _ => return None,
        })
    }

    #[inline]
    fn eval(&self, f: &Frame) -> u64 {
        match self {
            Operand::Const(c) => *c,
            Operand::Size => f.data.len() as u64,
            Operand::Field(at) => at.read(f.hdr, f.order),
            Operand::Digest(d, cover) => d.of(cover, f.hdr, f.order, f.data),
        }
    }
}

/// A verified program's field: every handle has a place (an invalid one
/// would read and write nothing, as the interpreter's accessors do).
fn field_spot(layout: &Layout, h: FieldHandle) -> Spot {
    layout.spot(h).unwrap_or_else(Spot::nowhere)
}

fn is_binop(op: Op) -> bool {
    matches!(
        op,
        Op::Add | Op::Sub | Op::And | Op::Or | Op::Xor | Op::Eq | Op::Ne | Op::Lt | Op::Gt
    )
}

/// The closure of a fusable sequence at the front of `ops`, and how many
/// operations it stands for.
fn fused(ops: &[Op], layout: &Layout) -> Option<(Step, usize)> {
    let a = Operand::of(*ops.first()?, layout)?;
    match *ops.get(1..)? {
        [second, op, Op::Abort(v), ..] if is_binop(op) => {
            let b = Operand::of(second, layout)?;
            Some((
                Box::new(move |_, f| (binop(op, a.eval(f), b.eval(f)) != 0).then_some(v)),
                4,
            ))
        }
        [Op::PopField(h), ..] => {
            let at = field_spot(layout, h);
            Some((
                Box::new(move |_, f| {
                    let v = a.eval(f);
                    at.write(f.hdr, f.order, v);
                    None
                }),
                2,
            ))
        }
        [Op::Abort(v), ..] => Some((Box::new(move |_, f| (a.eval(f) != 0).then_some(v)), 2)),
        _ => None,
    }
}

/// The closure of one operation.
fn single(op: Op, layout: &Layout) -> Step {
    if let Some(a) = Operand::of(op, layout) {
        return Box::new(move |s, f| {
            s.push(a.eval(f));
            None
        });
    }
    match op {
        Op::PopField(h) => {
            let at = field_spot(layout, h);
            Box::new(move |s, f| {
                let v = s.pop();
                at.write(f.hdr, f.order, v);
                None
            })
        }
        Op::Return(v) => Box::new(move |_, _| Some(v)),
        Op::Abort(v) => Box::new(move |s, _| (s.pop() != 0).then_some(v)),
        _ => Box::new(move |s, _| {
            let b = s.pop();
            let a = s.pop();
            s.push(binop(op, a, b));
            None
        }),
    }
}

type Step = Box<dyn Fn(&mut Stack, &mut Frame) -> Option<u64> + Send + Sync>;

/// A verified program compiled to closures: each operation's constant,
/// field position and arithmetic bound once.
#[derive(Clone)]
pub struct Compiled {
    steps: Arc<[Step]>,
}

impl Compiled {
    /// Runs the compiled program on `f`.
    pub fn run(&self, f: &mut Frame) -> u64 {
        let mut s = Stack {
            v: [0; MAX_DEPTH],
            n: 0,
        };
        for step in self.steps.iter() {
            if let Some(v) = step(&mut s, f) {
                return v;
            }
        }
        0
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compiled({} steps)", self.steps.len())
    }
}

#[cfg(test)]
mod tests;
