-- Wireshark/tshark dissector for seed 003's Protocol Accelerator (Strata's
-- strata-pa; crates/strata-pa/README.md describes the wire).
--
-- After an Ethernet II header with EtherType 0x88B5 comes the 8-byte
-- preamble, always in network order: the connection-identification-present
-- bit, the byte-order bit (set: the headers after it are little-endian) and a
-- 62-bit cookie. Then the connection identification (only when the bit is
-- set), the protocol-specific, message-specific and gossip headers, each a
-- whole number of bytes, the packing header (a count: 0 for one message, n for
-- n messages followed by n-1 LEB128 lengths), and the data.
--
-- Where each field sits inside the four headers is not fixed: the PA's field
-- compiler packs every layer's fields. The `layout` preference gives the
-- compiled layout as `class:name:offset:bits,...` (strata_pa's
-- `Layout::describe`); the default is the paper's 4-layer stack's, which a
-- test keeps equal to what the compiler produces. Every field is shown as
-- `pa.field` "name=value", so `pa.field == "seq=3"` filters.
--
--   tshark -X lua_script:tools/wireshark/strata_pa.lua -r capture.pcap -Y pa
--
-- The identification class starts with the PA's `cookie` field (64 bits):
-- the checksum covers the preamble through it, but it is not sent there (the
-- preamble carries it), so the dissector leaves it out of the wire header.
-- `echo` is the receiver's cookie as the sender knows it.
--
-- A field that spans nine bytes (a 64-bit field at an unaligned offset) is
-- shown without its value.

local DEFAULT_LAYOUT = "gossip:cookie-ack:14:1,conn-id:cookie:0:64,conn-id:echo:64:64,protocol:frag:14:1,message:last:16:1,protocol:seq:0:14,protocol:ack-only:15:1,gossip:ack:0:14,conn-id:src:128:64,conn-id:dst:192:64,conn-id:app:256:32,message:sum:0:16"

local pa = Proto("pa", "Strata Protocol Accelerator (seed 003)")
pa.prefs.layout = Pref.string("Field layout", DEFAULT_LAYOUT,
    "class:name:offset:bits,... as the PA's field compiler placed them")

local f = {
    ident = ProtoField.bool("pa.ident", "Connection identification present"),
    little = ProtoField.bool("pa.little_endian", "Headers little-endian"),
    cookie = ProtoField.uint64("pa.cookie", "Connection cookie", base.HEX),
    class = ProtoField.string("pa.class", "Header"),
    field = ProtoField.string("pa.field", "Field"),
    count = ProtoField.uint8("pa.packed", "Packed messages (0: not packed)", base.DEC),
    len = ProtoField.uint32("pa.length", "Message length", base.DEC),
    data = ProtoField.bytes("pa.data", "Data"),
}
pa.fields = { f.ident, f.little, f.cookie, f.class, f.field, f.count, f.len, f.data }

local CLASSES = { "conn-id", "protocol", "message", "gossip" }

-- The layout: per class, its fields and its length in bytes.
local function parse_layout(text)
    local by_class = {}
    for _, c in ipairs(CLASSES) do
        by_class[c] = { fields = {}, bytes = 0 }
    end
    for item in string.gmatch(text, "[^,]+") do
        local class, name, off, bits = string.match(item, "^%s*([%w-]+):([^:]+):(%d+):(%d+)%s*$")
        if class and by_class[class] then
            off, bits = tonumber(off), tonumber(bits)
            local c = by_class[class]
            table.insert(c.fields, { name = name, off = off, bits = bits })
            c.bytes = math.max(c.bytes, math.ceil((off + bits) / 8))
        end
    end
    -- The PA's `cookie` is the preamble's: not in the identification sent.
    local id = by_class["conn-id"]
    for i, fd in ipairs(id.fields) do
        if fd.name == "cookie" and fd.off == 0 and fd.bits == 64 then
            table.remove(id.fields, i)
            for _, other in ipairs(id.fields) do
                other.off = other.off - 64
            end
            id.bytes = id.bytes - 8
            break
        end
    end
    return by_class
end

-- A field's value, or nil when it spans more than eight bytes.
local function value(tvb, start, little, off, bits)
    local first = math.floor(off / 8)
    local last = math.floor((off + bits - 1) / 8)
    if last - first >= 8 then
        return nil
    end
    local v = UInt64(0)
    if little then
        for i = last, first, -1 do
            v = v:lshift(8):bor(UInt64(tvb(start + i, 1):uint()))
        end
        v = v:rshift(off % 8)
    else
        for i = first, last do
            v = v:lshift(8):bor(UInt64(tvb(start + i, 1):uint()))
        end
        v = v:rshift((last - first + 1) * 8 - (off % 8) - bits)
    end
    return v:band(UInt64.max():rshift(64 - bits))
end

function pa.dissector(buf, pinfo, tree)
    if buf:len() < 8 then
        return 0
    end
    pinfo.cols.protocol = "PA"
    local layout = parse_layout(pa.prefs.layout)
    local t = tree:add(pa, buf())
    local first = buf(0, 1):uint()
    local ident = first >= 0x80
    local little = (first % 0x80) >= 0x40
    t:add(f.ident, buf(0, 1), ident)
    t:add(f.little, buf(0, 1), little)
    t:add(f.cookie, buf(0, 8), buf(0, 8):uint64():band(UInt64.max():rshift(2)))
    local at = 8
    local info = {}
    for _, class in ipairs(CLASSES) do
        local c = layout[class]
        if class ~= "conn-id" or ident then
            if at + c.bytes > buf:len() then
                t:add_expert_info(PI_MALFORMED, PI_ERROR, "truncated " .. class .. " header")
                return buf:len()
            end
            local h = t:add(f.class, buf(at, c.bytes), class)
            for _, fd in ipairs(c.fields) do
                local v = value(buf, at, little, fd.off, fd.bits)
                local shown = fd.name .. "=" .. (v and tostring(v) or "?")
                local span = buf(at + math.floor(fd.off / 8),
                    math.floor((fd.off + fd.bits - 1) / 8) - math.floor(fd.off / 8) + 1)
                h:add(f.field, span, shown)
                if class == "protocol" then
                    table.insert(info, shown)
                end
            end
            at = at + c.bytes
        end
    end
    if at >= buf:len() then
        -- A message of the layers themselves (a lone acknowledgement).
        pinfo.cols.info = "PA " .. table.concat(info, " ")
        return buf:len()
    end
    local n = buf(at, 1):uint()
    t:add(f.count, buf(at, 1))
    at = at + 1
    local lens = {}
    for _ = 2, n do
        local len, shift = 0, 0
        repeat
            if at >= buf:len() then
                t:add_expert_info(PI_MALFORMED, PI_ERROR, "truncated packing header")
                return buf:len()
            end
            local b = buf(at, 1):uint()
            len = len + (b % 0x80) * (2 ^ shift)
            shift = shift + 7
            at = at + 1
        until b < 0x80
        table.insert(lens, len)
    end
    for _, len in ipairs(lens) do
        if at + len > buf:len() then
            t:add_expert_info(PI_MALFORMED, PI_ERROR, "packed length beyond the frame")
            return buf:len()
        end
        t:add(f.len, buf(at, len), len)
        at = at + len
    end
    if at < buf:len() then
        t:add(f.data, buf(at))
    end
    pinfo.cols.info = "PA " .. table.concat(info, " ") ..
        (n > 1 and (" packed " .. n) or "") .. (ident and " ident" or "")
    return buf:len()
end

DissectorTable.get("ethertype"):add(0x88B5, pa)
