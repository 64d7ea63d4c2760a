-- Wireshark/tshark dissector for ETHDAA, Strata's Ethernet extension for Direct
-- Application Association (seed 000 §4.2; crates/strata-proto/src/ethdaa/wire.rs).
--
-- After an Ethernet II header with ethertype 0x88B6 come the receiver's
-- application identifier, the deadline/priority, the sender's application
-- identifier (4 bytes each, big-endian) and the inner ethertype (2 bytes); the
-- rest is handed to Wireshark's ethertype table, so IPv4, ARP, UDP and TCP inside
-- are dissected and checked as usual.
--
--   tshark -X lua_script:tools/wireshark/ethdaa.lua -r capture.pcap

local ethdaa = Proto("ethdaa", "Strata ETHDAA (Direct Application Association)")

local f_app = ProtoField.uint32("ethdaa.app_id", "Application identifier", base.DEC)
local f_prio = ProtoField.uint32("ethdaa.priority", "Deadline/priority", base.DEC)
local f_sender = ProtoField.uint32("ethdaa.sender", "Sender's application identifier", base.DEC)
local f_type = ProtoField.uint16("ethdaa.type", "Type", base.HEX)
ethdaa.fields = { f_app, f_prio, f_sender, f_type }

local ethertypes = DissectorTable.get("ethertype")

function ethdaa.dissector(buf, pinfo, tree)
    if buf:len() < 14 then
        return 0
    end
    pinfo.cols.protocol = "ETHDAA"
    local t = tree:add(ethdaa, buf(0, 14))
    t:add(f_app, buf(0, 4))
    t:add(f_prio, buf(4, 4))
    t:add(f_sender, buf(8, 4))
    t:add(f_type, buf(12, 2))
    local inner = buf(12, 2):uint()
    if not ethertypes:try(inner, buf(14):tvb(), pinfo, tree) then
        Dissector.get("data"):call(buf(14):tvb(), pinfo, tree)
    end
    return buf:len()
end

ethertypes:add(0x88B6, ethdaa)
