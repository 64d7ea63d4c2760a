-- Wireshark/tshark dissector for seed 001's transport over UDP (Strata's
-- strata-xport; the layout is crates/strata-xport/src/wire.rs's module doc).
--
-- Every packet is one UDP datagram starting with a 16-byte common header:
-- version (2), type (1 CONNECT, 2 RETRY, 3 ACCEPT, 4 CONTROL, 5 DATA, 6 RESET),
-- flags, XTP header checksum, the receiver's connection id. The ports are
-- negotiated at set-up, so the dissector is a heuristic on UDP: a datagram is
-- this transport's when its version, type and lengths fit and its mandatory
-- header checksum matches (a 32-bit check, so other UDP traffic is not
-- claimed). A DATA header is 28 bytes (32 with the data checksum); its
-- payload's length is the datagram's remainder, not sent but covered by the
-- header checksum (summed after the header as a 32-bit word), and its stream
-- offset is sent modulo 2^32. What then disagrees — a data checksum that does
-- not match, an unknown recovery kind — is reported as an expert error
-- (Malformed or Checksum).
--
--   tshark -X lua_script:tools/wireshark/xport.lua -r capture.pcap -Y xport

local bit = bit or bit32

local xport = Proto("xport", "Strata seed 001 transport")

local kinds = {
    [1] = "CONNECT", [2] = "RETRY", [3] = "ACCEPT",
    [4] = "CONTROL", [5] = "DATA", [6] = "RESET",
}
local recoveries = { [0] = "none", [1] = "go-back-N", [2] = "selective" }
local reset_reasons = { [0] = "closed by the application", [1] = "protocol violation" }

local f = {
    version = ProtoField.uint8("xport.version", "Version", base.DEC),
    type = ProtoField.uint8("xport.type", "Type", base.DEC, kinds),
    flags = ProtoField.uint16("xport.flags", "Flags", base.HEX),
    f_dcsum = ProtoField.bool("xport.flags.data_checksum", "Data checksum present", 16, nil, 0x0001),
    f_fin = ProtoField.bool("xport.flags.fin", "FIN (stream ends here)", 16, nil, 0x0002),
    f_retx = ProtoField.bool("xport.flags.retransmission", "Retransmission", 16, nil, 0x0004),
    f_fin_seen = ProtoField.bool("xport.flags.fin_seen", "FIN seen", 16, nil, 0x0010),
    f_slow_start = ProtoField.bool("xport.flags.slow_start", "Slow start", 16, nil, 0x0020),
    hcsum = ProtoField.uint32("xport.header_checksum", "Header checksum (XTP)", base.HEX),
    conn = ProtoField.uint64("xport.connection_id", "Receiver's connection id", base.HEX),
    own_id = ProtoField.uint64("xport.own_id", "Sender's connection id", base.HEX),
    isn = ProtoField.uint32("xport.isn", "Initial sequence number", base.DEC),
    app_buffer = ProtoField.uint32("xport.app_buffer", "Application buffer size", base.DEC),
    socket_buffer = ProtoField.uint32("xport.socket_buffer", "Socket buffer size", base.DEC),
    sockets = ProtoField.uint8("xport.data_sockets", "Data sockets", base.DEC),
    options = ProtoField.uint8("xport.options", "Options", base.HEX),
    o_dcsum = ProtoField.bool("xport.options.data_checksum", "Data packets carry the data checksum", 8, nil, 0x01),
    max_payload = ProtoField.uint16("xport.max_payload", "Largest payload", base.DEC),
    cookie = ProtoField.bytes("xport.cookie", "Cookie"),
    port = ProtoField.uint16("xport.data_port", "Data port", base.DEC),
    next = ProtoField.uint32("xport.next_expected", "Next expected sequence", base.DEC),
    ts_echo = ProtoField.uint32("xport.ts_echo", "Timestamp echo (us)", base.DEC),
    cwnd = ProtoField.uint32("xport.cwnd", "Congestion window (packets)", base.DEC),
    recovery = ProtoField.uint8("xport.recovery", "Recovery request", base.DEC, recoveries),
    gap_count = ProtoField.uint8("xport.gap_count", "Gaps", base.DEC),
    serial = ProtoField.uint16("xport.serial", "Control serial", base.DEC),
    limit = ProtoField.uint64("xport.limit", "Receive limit (stream offset)", base.DEC),
    gap_first = ProtoField.uint32("xport.gap.first", "First missing", base.DEC),
    gap_end = ProtoField.uint32("xport.gap.end", "End (exclusive)", base.DEC),
    seq = ProtoField.uint32("xport.seq", "Sequence number", base.DEC),
    tsval = ProtoField.uint32("xport.tsval", "Timestamp (us)", base.DEC),
    offset = ProtoField.uint32("xport.offset", "Stream offset (mod 2^32)", base.DEC),
    len = ProtoField.uint32("xport.len", "Payload length (the datagram's remainder)", base.DEC),
    dcsum = ProtoField.uint32("xport.data_checksum", "Data checksum (XTP)", base.HEX),
    payload = ProtoField.bytes("xport.payload", "Payload"),
    reason = ProtoField.uint32("xport.reason", "Reason", base.DEC, reset_reasons),
}
xport.fields = {
    f.version, f.type, f.flags, f.f_dcsum, f.f_fin, f.f_retx, f.f_fin_seen, f.f_slow_start, f.hcsum, f.conn,
    f.own_id, f.isn, f.app_buffer, f.socket_buffer, f.sockets, f.options, f.o_dcsum,
    f.max_payload, f.cookie, f.port, f.next,
    f.ts_echo, f.cwnd, f.recovery, f.gap_count, f.serial, f.limit, f.gap_first, f.gap_end,
    f.seq, f.tsval, f.offset, f.len, f.dcsum, f.payload, f.reason,
}

local e_malformed = ProtoExpert.new("xport.malformed", "Malformed transport packet",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_dcsum = ProtoExpert.new("xport.data_checksum.bad", "Bad data checksum",
    expert.group.CHECKSUM, expert.severity.ERROR)
local e_hcsum = ProtoExpert.new("xport.header_checksum.bad", "Bad header checksum",
    expert.group.CHECKSUM, expert.severity.ERROR)
xport.experts = { e_malformed, e_dcsum, e_hcsum }

-- Fixed lengths by type (wire.rs: CONNECT_FIXED_LEN …); DATA's grows by 4
-- with the data checksum flag.
local fixed = { [1] = 56, [2] = 32, [3] = 40, [4] = 40, [5] = 28, [6] = 20 }

-- The header's length (ports and gaps included), or nil when the datagram
-- cannot be one of ours.
local function header_len(buf)
    local len = buf:len()
    if len < 16 or buf(0, 1):uint() ~= 2 then
        return nil
    end
    local kind = buf(1, 1):uint()
    local base_len = fixed[kind]
    if kind == 5 and bit.band(buf(2, 2):uint(), 0x1) ~= 0 then
        base_len = 32
    end
    if base_len == nil or len < base_len then
        return nil
    end
    local h = base_len
    if kind == 1 or kind == 3 then
        local n = buf(36, 1):uint()
        if n == 0 or n > 16 then
            return nil
        end
        h = base_len + 2 * n
    elseif kind == 4 then
        local g = buf(29, 1):uint()
        if g > 64 then
            return nil
        end
        h = base_len + 8 * g
    end
    if len < h then
        return nil
    end
    return h
end

-- XTP's checksum (wire.rs xtp_checksum): XOR of the big-endian 16-bit words
-- in the high half, their rotated XOR in the low half; an odd byte is padded
-- with zero. `zero_at` (a byte offset or nil) reads the 4 bytes there as zero.
local function xtp(bytes, from, to, zero_at)
    local x, r = 0, 0
    local i = from
    while i < to do
        local hi = bytes:get_index(i)
        local lo = 0
        if i + 1 < to then
            lo = bytes:get_index(i + 1)
        end
        if zero_at ~= nil and i >= zero_at and i < zero_at + 4 then
            hi, lo = 0, 0
        end
        local w = hi * 256 + lo
        x = bit.bxor(x, w)
        r = bit.band(bit.bxor(bit.bor(bit.lshift(r, 1), bit.rshift(r, 15)), w), 0xffff)
        i = i + 2
    end
    return x * 65536 + r
end

-- A DATA header's checksum covers the payload's length too, summed after
-- the header as a big-endian 32-bit word.
local function header_checksum_ok(buf, h)
    local bytes = buf:bytes(0, h)
    if buf(1, 1):uint() == 5 then
        bytes:append(ByteArray.new(string.format("%08x", buf:reported_len() - h)))
    end
    return xtp(bytes, 0, bytes:len(), 4) == buf(4, 4):uint()
end

local function dissect(buf, pinfo, tree, h)
    local kind = buf(1, 1):uint()
    local flags = buf(2, 2):uint()
    pinfo.cols.protocol = "XPORT"
    local t = tree:add(xport, buf(), "Strata seed 001 transport, " .. kinds[kind])
    t:add(f.version, buf(0, 1))
    t:add(f.type, buf(1, 1))
    local ft = t:add(f.flags, buf(2, 2))
    ft:add(f.f_dcsum, buf(2, 2))
    ft:add(f.f_fin, buf(2, 2))
    ft:add(f.f_retx, buf(2, 2))
    ft:add(f.f_fin_seen, buf(2, 2))
    ft:add(f.f_slow_start, buf(2, 2))
    local hi = t:add(f.hcsum, buf(4, 4))
    if header_checksum_ok(buf, h) then
        hi:append_text(" [correct]")
    else
        -- Only through "Decode As": the heuristic claims correct ones only.
        hi:add_proto_expert_info(e_hcsum)
    end
    t:add(f.conn, buf(8, 8))
    local info = kinds[kind]

    if kind == 1 or kind == 3 then
        t:add(f.own_id, buf(16, 8))
        t:add(f.isn, buf(24, 4))
        t:add(f.app_buffer, buf(28, 4))
        t:add(f.socket_buffer, buf(32, 4))
        t:add(f.sockets, buf(36, 1))
        local ot = t:add(f.options, buf(37, 1))
        ot:add(f.o_dcsum, buf(37, 1))
        local mp = t:add(f.max_payload, buf(38, 2))
        if buf(38, 2):uint() == 0 then
            mp:add_proto_expert_info(e_malformed, "no payload size")
        end
        local ports_at = 40
        if kind == 1 then
            t:add(f.cookie, buf(40, 16))
            ports_at = 56
        end
        local n = buf(36, 1):uint()
        local ports = {}
        for i = 0, n - 1 do
            t:add(f.port, buf(ports_at + 2 * i, 2))
            ports[#ports + 1] = tostring(buf(ports_at + 2 * i, 2):uint())
        end
        info = string.format("%s id=%s sockets=%d ports=%s app_buffer=%d max_payload=%d",
            info, buf(16, 8):uint64():tohex(), n, table.concat(ports, ","), buf(28, 4):uint(),
            buf(38, 2):uint())
        if bit.band(buf(37, 1):uint(), 0x1) ~= 0 then
            info = info .. " data-checksum"
        end
    elseif kind == 2 then
        t:add(f.cookie, buf(16, 16))
    elseif kind == 4 then
        t:add(f.next, buf(16, 4))
        t:add(f.ts_echo, buf(20, 4))
        t:add(f.cwnd, buf(24, 4))
        local rec = buf(28, 1):uint()
        local ri = t:add(f.recovery, buf(28, 1))
        if recoveries[rec] == nil then
            ri:add_proto_expert_info(e_malformed, "unknown recovery request")
        end
        local g = buf(29, 1):uint()
        t:add(f.gap_count, buf(29, 1))
        t:add(f.serial, buf(30, 2))
        t:add(f.limit, buf(32, 8))
        for i = 0, g - 1 do
            local at = 40 + 8 * i
            local gt = t:add(xport, buf(at, 8), string.format("Gap [%d, %d)",
                buf(at, 4):uint(), buf(at + 4, 4):uint()))
            gt:add(f.gap_first, buf(at, 4))
            gt:add(f.gap_end, buf(at + 4, 4))
        end
        info = string.format("%s next=%d cwnd=%d recovery=%s gaps=%d limit=%s",
            info, buf(16, 4):uint(), buf(24, 4):uint(), recoveries[rec] or "?", g,
            tostring(buf(32, 8):uint64()))
        if bit.band(flags, 0x10) ~= 0 then
            info = info .. " FIN-seen"
        end
    elseif kind == 5 then
        t:add(f.seq, buf(16, 4))
        t:add(f.tsval, buf(20, 4))
        t:add(f.offset, buf(24, 4))
        local plen = buf:reported_len() - h
        t:add(f.len, plen):set_generated()
        if bit.band(flags, 0x1) ~= 0 then
            local ci = t:add(f.dcsum, buf(28, 4))
            if buf:len() == buf:reported_len() then
                local sum = 0
                if plen > 0 then
                    sum = xtp(buf:bytes(h, plen), 0, plen, nil)
                end
                if sum == buf(28, 4):uint() then
                    ci:append_text(" [correct]")
                else
                    ci:add_proto_expert_info(e_dcsum,
                        string.format("data checksum 0x%08x, computed 0x%08x", buf(28, 4):uint(), sum))
                end
            end
        end
        if buf:len() > h then
            t:add(f.payload, buf(h))
        end
        info = string.format("%s seq=%d offset=%d len=%d", info, buf(16, 4):uint(),
            buf(24, 4):uint(), plen)
        if bit.band(flags, 0x2) ~= 0 then
            info = info .. " FIN"
        end
        if bit.band(flags, 0x4) ~= 0 then
            info = info .. " retransmission"
        end
    elseif kind == 6 then
        t:add(f.reason, buf(16, 4))
        info = string.format("%s reason=%d", info, buf(16, 4):uint())
    end
    if kind ~= 5 and buf:reported_len() ~= h then
        t:add_proto_expert_info(e_malformed,
            string.format("%d bytes after the %d-byte packet", buf:reported_len() - h, h))
    end
    pinfo.cols.info = info
    return buf:len()
end

local function heuristic(buf, pinfo, tree)
    local h = header_len(buf)
    if h == nil or not header_checksum_ok(buf, h) then
        return false
    end
    dissect(buf, pinfo, tree, h)
    return true
end

function xport.dissector(buf, pinfo, tree)
    local h = header_len(buf)
    if h == nil then
        return 0
    end
    return dissect(buf, pinfo, tree, h)
end

xport:register_heuristic("udp", heuristic)
