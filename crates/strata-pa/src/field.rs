//! Header field classes and the field compiler (seed 003 §2.1).
//!
//! Every layer declares its fields once, at stack initialisation, with
//! [`LayoutBuilder::add_field`] and keeps the [`FieldHandle`] it gets back. The
//! compiler then packs all layers' fields into four compact headers, one per
//! [`Class`], bit by bit and ignoring layer boundaries: a 1-bit flag of one
//! layer sits next to a 15-bit number of another. Each class header is a whole
//! number of bytes (the protocol-specific one is compared with the prediction
//! as bytes, §3.2); within it only what the fields need is used.
//!
//! Accessors take the [`ByteOrder`] the preamble names, so unlike-endian peers
//! read each other's headers: in big-endian order bit 0 of a header is the most
//! significant bit of its first byte and a field's value is written most
//! significant bit first; in little-endian order the header is one long
//! little-endian integer and bit 0 is the least significant bit of its first
//! byte.

use thiserror::Error;

/// The four classes of header information (§2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Fields that never change during a connection (addresses, ports): sent
    /// only on first, retransmitted and unusual messages.
    ConnId = 0,
    /// Fields that depend only on protocol state (a sequence number, a message
    /// type): predicted for the next send and the next delivery.
    Protocol = 1,
    /// Fields that depend on the message itself (a checksum, a length):
    /// written by the send filter and checked by the delivery filter.
    Message = 2,
    /// Fields that need not accompany the message but ride along (piggybacked
    /// acknowledgements); they may be out of date without harm.
    Gossip = 3,
}

impl Class {
    /// The four classes in wire order (Figure 1).
    pub const ALL: [Class; 4] = [
        Class::ConnId,
        Class::Protocol,
        Class::Message,
        Class::Gossip,
    ];

    /// Its short name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::ConnId => "conn-id",
            Class::Protocol => "protocol",
            Class::Message => "message",
            Class::Gossip => "gossip",
        }
    }
}

/// The byte order of a message's headers, named by the preamble's byte-order bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Most significant byte (and bit) first.
    Big,
    /// Least significant byte (and bit) first.
    Little,
}

impl ByteOrder {
    /// This machine's order: what a sender writes in.
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "little") {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
}

/// A field's handle: what a layer keeps to read and write its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldHandle(pub(crate) u16);

impl FieldHandle {
    /// Its index in the layout's field table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Why a set of fields cannot be compiled.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    /// A field must be 1 to 64 bits wide.
    #[error("field {name}: {bits} bits (1 to 64 allowed)")]
    Width {
        /// The field.
        name: &'static str,
        /// Its width.
        bits: u32,
    },
    /// Two fields asked for offsets that overlap.
    #[error("fields {0} and {1} ask for overlapping offsets")]
    Overlap(&'static str, &'static str),
    /// Too many fields, or a header longer than a message can carry.
    #[error("too many fields or bits in the {0} header")]
    TooLarge(&'static str),
}

/// One declared field.
#[derive(Clone, Copy, Debug)]
struct Declared {
    class: Class,
    name: &'static str,
    bits: u32,
    offset: Option<u32>,
}

/// Collects the fields every layer asks for (§2.1's `add_field`).
#[derive(Clone, Debug, Default)]
pub struct LayoutBuilder {
    fields: Vec<Declared>,
}

/// Where a compiled field lives: its absolute bit offset in the concatenated
/// headers and its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The field's class.
    pub class: Class,
    /// The field's name (for reports and the dissector).
    pub name: &'static str,
    /// Bit offset from the start of its class header.
    pub offset: u32,
    /// Width in bits.
    pub bits: u32,
}

/// The largest class header, in bytes (a field offset beyond it is refused).
pub const MAX_HEADER_BYTES: u32 = 256;

impl LayoutBuilder {
    /// An empty set of fields.
    pub fn new() -> Self {
        LayoutBuilder::default()
    }

    /// Asks for a field of `bits` bits in the `class` header, at bit `offset`
    /// of that header if given (`None` is the paper's "don't care"). `name`
    /// need not be unique.
    pub fn add_field(
        &mut self,
        class: Class,
        name: &'static str,
        bits: u32,
        offset: Option<u32>,
    ) -> FieldHandle {
        let h = FieldHandle(self.fields.len() as u16);
        self.fields.push(Declared {
            class,
            name,
            bits,
            offset,
        });
        h
    }

    /// Compiles the fields into four compact headers. Fields with an offset
    /// are placed first, where asked; the others by decreasing width, each at
    /// the lowest free position — byte-aligned when the width is a whole
    /// number of bytes (for cheap access), anywhere otherwise (no padding).
    pub fn compile(&self) -> Result<Layout, LayoutError> {
        if self.fields.len() > u16::MAX as usize {
            return Err(LayoutError::TooLarge("any"));
        }
        for f in &self.fields {
            if !(1..=64).contains(&f.bits) {
                return Err(LayoutError::Width {
                    name: f.name,
                    bits: f.bits,
                });
            }
        }
        let mut placed: Vec<Option<u32>> = vec![None; self.fields.len()];
        let mut bytes = [0u32; 4];
        for class in Class::ALL {
            let mut taken: Vec<(u32, u32, &'static str)> = Vec::new();
            let mine = || {
                self.fields
                    .iter()
                    .enumerate()
                    .filter(move |(_, f)| f.class == class)
            };
            for (i, f) in mine().filter(|(_, f)| f.offset.is_some()) {
                let at = f.offset.unwrap_or(0);
                if at + f.bits > MAX_HEADER_BYTES * 8 {
                    return Err(LayoutError::TooLarge(class.name()));
                }
                if let Some(&(_, _, other)) =
                    taken.iter().find(|(s, e, _)| at < *e && *s < at + f.bits)
                {
                    return Err(LayoutError::Overlap(other, f.name));
                }
                taken.push((at, at + f.bits, f.name));
                placed[i] = Some(at);
            }
            let mut free: Vec<usize> = mine()
                .filter(|(_, f)| f.offset.is_none())
                .map(|(i, _)| i)
                .collect();
            // Widest first; the declaration order breaks ties so a layout is
            // the same on both peers.
            free.sort_by_key(|&i| (std::cmp::Reverse(self.fields[i].bits), i));
            for i in free {
                let f = self.fields[i];
                let align = if f.bits.is_multiple_of(8) { 8 } else { 1 };
                let at = lowest_free(&mut taken, f.bits, align);
                if at + f.bits > MAX_HEADER_BYTES * 8 {
                    return Err(LayoutError::TooLarge(class.name()));
                }
                taken.push((at, at + f.bits, f.name));
                placed[i] = Some(at);
            }
            let end = taken.iter().map(|t| t.1).max().unwrap_or(0);
            bytes[class as usize] = end.div_ceil(8);
        }
        let mut starts = [0u32; 5];
        for c in 0..4 {
            starts[c + 1] = starts[c] + bytes[c];
        }
        let fields = self
            .fields
            .iter()
            .zip(placed)
            .map(|(f, at)| Placement {
                class: f.class,
                name: f.name,
                offset: at.unwrap_or(0),
                bits: f.bits,
            })
            .collect::<Vec<_>>();
        let abs: Vec<Abs> = fields
            .iter()
            .map(|p| Abs {
                bit: starts[p.class as usize] * 8 + p.offset,
                bits: p.bits,
            })
            .collect();
        let total = starts[4] as usize;
        let spots = abs
            .iter()
            .map(|a| Spot::new(a.bit, a.bits, total))
            .collect();
        Ok(Layout {
            fields,
            abs,
            spots,
            starts,
        })
    }
}

/// The lowest position where `bits` bits aligned to `align` fit among `taken`.
fn lowest_free(taken: &mut [(u32, u32, &'static str)], bits: u32, align: u32) -> u32 {
    taken.sort_unstable_by_key(|t| t.0);
    let mut at = 0;
    for &(s, e, _) in taken.iter() {
        if at + bits <= s {
            break;
        }
        at = at.max(e.div_ceil(align) * align);
    }
    at
}

#[derive(Clone, Copy, Debug)]
struct Abs {
    bit: u32,
    bits: u32,
}

/// A field's place resolved once for the accessors: its absolute bit and
/// width, and the eight bytes of the four headers that hold it with the
/// shifts that take it out of them in each byte order (see [`window`]).
/// A buffer that holds those eight bytes is read and written with one
/// load and no arithmetic on positions; any other goes the general way.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spot {
    bit: u32,
    bits: u32,
    /// First of the eight bytes; shift when big-endian, when little; mask.
    word: Option<(usize, u32, u32, u64)>,
}

impl Spot {
    fn new(bit: u32, bits: u32, total: usize) -> Spot {
        let word = window(total, bit, bits).map(|(s, off)| {
            let big = word_shift(ByteOrder::Big, off, bits);
            let little = word_shift(ByteOrder::Little, off, bits);
            (s, big, little, mask_of(bits))
        });
        Spot { bit, bits, word }
    }

    /// No field: reads 0, writes nothing.
    pub(crate) fn nowhere() -> Spot {
        Spot {
            bit: 0,
            bits: 0,
            word: None,
        }
    }

    /// The field's value in `hdr`.
    #[inline]
    pub(crate) fn read(&self, hdr: &[u8], order: ByteOrder) -> u64 {
        if let Some((s, big, little, mask)) = self.word
            && let Some(w) = hdr.get(s..s + 8).and_then(|w| w.try_into().ok())
        {
            let shift = if order == ByteOrder::Big { big } else { little };
            return (word(w, order) >> shift) & mask;
        }
        read_bits(hdr, order, self.bit, self.bits)
    }

    /// Writes the field's value into `hdr`, its low bits only.
    #[inline]
    pub(crate) fn write(&self, hdr: &mut [u8], order: ByteOrder, value: u64) {
        if let Some((s, big, little, mask)) = self.word
            && let Some(w) = hdr.get_mut(s..s + 8)
            && let Ok(bytes) = <[u8; 8]>::try_from(&*w)
        {
            let shift = if order == ByteOrder::Big { big } else { little };
            let x = (word(bytes, order) & !(mask << shift)) | ((value & mask) << shift);
            w.copy_from_slice(&match order {
                ByteOrder::Big => x.to_be_bytes(),
                ByteOrder::Little => x.to_le_bytes(),
            });
            return;
        }
        write_bits(hdr, order, self.bit, self.bits, value);
    }
}

/// A compiled layout: where every field lives in the four class headers,
/// which sit one after the other in wire order (Figure 1).
#[derive(Clone, Debug)]
pub struct Layout {
    fields: Vec<Placement>,
    abs: Vec<Abs>,
    spots: Vec<Spot>,
    /// Byte offset of each class header in the concatenation; `starts[4]` is
    /// the total.
    starts: [u32; 5],
}

impl Layout {
    /// The bytes of one class header.
    pub fn class_bytes(&self, class: Class) -> usize {
        let c = class as usize;
        (self.starts[c + 1] - self.starts[c]) as usize
    }

    /// The byte range of one class header in the concatenation.
    pub fn class_range(&self, class: Class) -> std::ops::Range<usize> {
        let c = class as usize;
        self.starts[c] as usize..self.starts[c + 1] as usize
    }

    /// The bytes of all four class headers.
    pub fn total_bytes(&self) -> usize {
        self.starts[4] as usize
    }

    /// The compiled fields, by handle index.
    pub fn fields(&self) -> &[Placement] {
        &self.fields
    }

    /// The layout as the Wireshark dissector's `layout` preference takes it
    /// (tools/wireshark/strata_pa.lua): `class:name:offset:bits` for every
    /// field, comma-separated, in handle order.
    pub fn describe(&self) -> String {
        self.fields
            .iter()
            .map(|p| format!("{}:{}:{}:{}", p.class.name(), p.name, p.offset, p.bits))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether `h` names a field of this layout.
    pub fn is_valid(&self, h: FieldHandle) -> bool {
        h.index() < self.abs.len()
    }

    /// A fresh, zeroed buffer for the four headers.
    pub fn headers(&self) -> Vec<u8> {
        vec![0; self.total_bytes()]
    }

    /// Reads a field of `hdr` (the four headers, concatenated). A handle of
    /// another layout or a buffer too short reads as 0: accessors never panic.
    #[inline]
    pub fn get(&self, hdr: &[u8], order: ByteOrder, h: FieldHandle) -> u64 {
        match self.spots.get(h.index()) {
            Some(a) => a.read(hdr, order),
            None => 0,
        }
    }

    /// Writes a field of `hdr`, keeping only the value's low `bits` bits.
    #[inline]
    pub fn set(&self, hdr: &mut [u8], order: ByteOrder, h: FieldHandle, value: u64) {
        if let Some(a) = self.spots.get(h.index()) {
            a.write(hdr, order, value);
        }
    }

    /// The field's absolute bit position and width, for compiled filters.
    pub(crate) fn position(&self, h: FieldHandle) -> Option<(u32, u32)> {
        self.abs.get(h.index()).map(|a| (a.bit, a.bits))
    }

    /// The field's place for compiled accessors (filters).
    pub(crate) fn spot(&self, h: FieldHandle) -> Option<Spot> {
        self.spots.get(h.index()).copied()
    }

    /// The field's width in bits (0 for an invalid handle).
    pub fn bits(&self, h: FieldHandle) -> u32 {
        self.abs.get(h.index()).map_or(0, |a| a.bits)
    }
}

/// The bytes a field of `bits` bits at bit `bit` spans: at most 9.
#[inline]
fn span(bit: u32, bits: u32) -> (usize, usize) {
    let first = (bit / 8) as usize;
    let last = ((bit + bits - 1) / 8) as usize;
    (first, last + 1)
}

/// The bytes of a field's span as one number, first byte most significant
/// (big-endian) or least (little-endian). A byte loop, not a copy into a
/// word: a copy of a variable length is a call of `memcpy` per field.
#[inline]
fn load(bytes: &[u8], order: ByteOrder) -> u64 {
    let mut x = 0u64;
    match order {
        ByteOrder::Big => {
            for &b in bytes {
                x = (x << 8) | u64::from(b);
            }
        }
        ByteOrder::Little => {
            for &b in bytes.iter().rev() {
                x = (x << 8) | u64::from(b);
            }
        }
    }
    x
}

/// Writes `x` back over the span, as [`load`] read it.
#[inline]
fn store(bytes: &mut [u8], order: ByteOrder, mut x: u64) {
    match order {
        ByteOrder::Big => {
            for b in bytes.iter_mut().rev() {
                *b = x as u8;
                x >>= 8;
            }
        }
        ByteOrder::Little => {
            for b in bytes.iter_mut() {
                *b = x as u8;
                x >>= 8;
            }
        }
    }
}

/// Where a field's lowest bit sits in its span loaded by [`load`].
#[inline]
fn shift_of(order: ByteOrder, bit: u32, bits: u32, n: usize) -> u32 {
    match order {
        // The span right-aligned in a big-endian word.
        ByteOrder::Big => n as u32 * 8 - (bit % 8) - bits,
        ByteOrder::Little => bit % 8,
    }
}

#[inline]
fn mask_of(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// A field over nine bytes (57 to 64 bits, not byte-aligned): the span in
/// a 128-bit word. Rare; kept apart so the common case stays in 64 bits.
#[cold]
fn read_wide(bytes: &[u8], order: ByteOrder, shift: u32, bits: u32) -> u64 {
    let mut x = 0u128;
    for i in 0..bytes.len() {
        let b = match order {
            ByteOrder::Big => bytes[i],
            ByteOrder::Little => bytes[bytes.len() - 1 - i],
        };
        x = (x << 8) | u128::from(b);
    }
    (x >> shift) as u64 & mask_of(bits)
}

#[cold]
fn write_wide(bytes: &mut [u8], order: ByteOrder, shift: u32, bits: u32, value: u64) {
    let mask = u128::from(mask_of(bits)) << shift;
    let v = (u128::from(value) << shift) & mask;
    let n = bytes.len();
    for (i, byte) in bytes.iter_mut().enumerate() {
        // Byte i of the span holds bits (n - 1 - i) * 8 .. of the word when
        // big-endian, i * 8 .. when little-endian.
        let at = match order {
            ByteOrder::Big => (n - 1 - i) * 8,
            ByteOrder::Little => i * 8,
        };
        let m = (mask >> at) as u8;
        *byte = (*byte & !m) | ((v >> at) as u8 & m);
    }
}

/// Where a field of `bits` bits at bit `bit` sits in eight bytes of a
/// buffer of `len` bytes: the first of the eight, and the field's bit
/// offset in them counted as [`shift_of`] counts it in a span. `None` when
/// the buffer is shorter than eight bytes or the field is outside it or
/// spans nine. Eight bytes are one load (no loop over the span, no call of
/// `memcpy`) for the accessors below, which header fields of the PA's
/// stack take on every message.
#[inline]
fn window(len: usize, bit: u32, bits: u32) -> Option<(usize, u32)> {
    let (a, b) = span(bit, bits);
    if len < 8 || b > len || b - a > 8 {
        return None;
    }
    let s = a.min(len - 8);
    Some((s, (a - s) as u32 * 8 + bit % 8))
}

#[inline]
fn word(bytes: [u8; 8], order: ByteOrder) -> u64 {
    match order {
        ByteOrder::Big => u64::from_be_bytes(bytes),
        ByteOrder::Little => u64::from_le_bytes(bytes),
    }
}

/// The shift of a field at bit offset `off` of an eight-byte word.
#[inline]
fn word_shift(order: ByteOrder, off: u32, bits: u32) -> u32 {
    match order {
        ByteOrder::Big => 64 - off - bits,
        ByteOrder::Little => off,
    }
}

#[inline]
pub(crate) fn read_bits(hdr: &[u8], order: ByteOrder, bit: u32, bits: u32) -> u64 {
    if bits == 0 {
        return 0;
    }
    if let Some((s, off)) = window(hdr.len(), bit, bits)
        && let Some(w) = hdr.get(s..s + 8).and_then(|w| w.try_into().ok())
    {
        return (word(w, order) >> word_shift(order, off, bits)) & mask_of(bits);
    }
    read_bits_bytewise(hdr, order, bit, bits)
}

/// [`read_bits`] a byte at a time, for buffers shorter than eight bytes
/// (and the reference the fast one is tested against).
#[inline]
pub(crate) fn read_bits_bytewise(hdr: &[u8], order: ByteOrder, bit: u32, bits: u32) -> u64 {
    if bits == 0 {
        return 0;
    }
    let (a, b) = span(bit, bits);
    let Some(bytes) = hdr.get(a..b) else {
        return 0;
    };
    let shift = shift_of(order, bit, bits, b - a);
    if b - a > 8 {
        return read_wide(bytes, order, shift, bits);
    }
    (load(bytes, order) >> shift) & mask_of(bits)
}

#[inline]
pub(crate) fn write_bits(hdr: &mut [u8], order: ByteOrder, bit: u32, bits: u32, value: u64) {
    if bits == 0 {
        return;
    }
    if let Some((s, off)) = window(hdr.len(), bit, bits)
        && let Some(w) = hdr.get_mut(s..s + 8)
        && let Ok(bytes) = <[u8; 8]>::try_from(&*w)
    {
        let (shift, mask) = (word_shift(order, off, bits), mask_of(bits));
        let x = (word(bytes, order) & !(mask << shift)) | ((value & mask) << shift);
        w.copy_from_slice(&match order {
            ByteOrder::Big => x.to_be_bytes(),
            ByteOrder::Little => x.to_le_bytes(),
        });
        return;
    }
    write_bits_bytewise(hdr, order, bit, bits, value);
}

/// [`write_bits`] a byte at a time.
#[inline]
pub(crate) fn write_bits_bytewise(
    hdr: &mut [u8],
    order: ByteOrder,
    bit: u32,
    bits: u32,
    value: u64,
) {
    if bits == 0 {
        return;
    }
    let (a, b) = span(bit, bits);
    let Some(bytes) = hdr.get_mut(a..b) else {
        return;
    };
    let shift = shift_of(order, bit, bits, b - a);
    if b - a > 8 {
        return write_wide(bytes, order, shift, bits, value);
    }
    let mask = mask_of(bits);
    let x = if bit.is_multiple_of(8) && bits.is_multiple_of(8) {
        // Whole bytes: nothing of the span to keep.
        0
    } else {
        load(bytes, order) & !(mask << shift)
    };
    store(bytes, order, x | ((value & mask) << shift));
}

#[cfg(test)]
mod tests;
