//! A test harness for STREAMS endpoints: streams built by a caller's
//! recipe, bound through TPI, joined by an in-memory link carrying DDP
//! datagrams; and a run of ATP transactions between two of them that
//! checks exactly-once delivery and the bytes on the wire.

use std::collections::HashMap;
use std::time::Duration;

use crate::appletalk::wire::atp::TRelTimeout;
use crate::appletalk::wire::ddp::{self, Header, Repr};
use crate::atp_service::{AtpService, RETRY_FOREVER};
use crate::streams::Stream;
use crate::streams::mblk::{DblkPool, Dblks, MsgType, mkmsg};
use crate::streams::tpi::{TAddr, Tpi};
use crate::testlink::Link;

/// The network the endpoints are on.
pub const NET: u16 = 0xff00;

/// A stream and the address it is bound to.
pub struct Endpoint {
    /// The stream.
    pub s: Stream,
    /// Its bound address.
    pub addr: TAddr,
}

impl Endpoint {
    /// Hand ATP a service record and its data for `dest`, as TPI
    /// (`T_UNITDATA_REQ` with the record as options).
    pub fn send(
        &mut self,
        dest: TAddr,
        rec: AtpService,
        data: &[u8],
    ) -> Result<(), crate::errno::Errno> {
        self.s.putmsg(
            Some(&Tpi::UnitdataReq {
                dest,
                opt: rec.encode().to_vec(),
            }),
            Some(data),
        )
    }
}

/// How to build a node's stream: modules pushed, not yet bound.
pub type Recipe = fn(&DblkPool, u8) -> Stream;

/// The all-native stream: head / atp / ddp / device.
pub fn native(pool: &DblkPool, node: u8) -> Stream {
    let mut s = Stream::open(pool.clone());
    s.push(Box::new(super::ddp::Ddp::new(TAddr::new(NET, node, 0))))
        .unwrap();
    s.push(Box::new(super::atp::Atp::new())).unwrap();
    s
}

/// A stream from `recipe` for `node`, bound to `port` with `T_BIND_REQ`.
pub fn open(recipe: Recipe, pool: &DblkPool, node: u8, port: u8) -> Endpoint {
    let mut s = recipe(pool, node);
    s.putmsg(
        Some(&Tpi::BindReq {
            addr: TAddr::new(0, 0, port),
        }),
        None,
    )
    .unwrap();
    s.run_queues();
    let ack = s.getmsg().unwrap().expect("an answer to the bind");
    let Some(Tpi::BindAck { addr }) = Tpi::of(&ack) else {
        panic!("T_BIND_ACK, got {:?}", Tpi::of(&ack))
    };
    Endpoint { s, addr }
}

/// Carry every datagram the endpoints' devices send to the endpoint it is
/// addressed to (the driver's demultiplexing), until the link is quiet.
pub fn exchange(
    eps: &mut [&mut Endpoint],
    link: &mut Link,
    pool: &DblkPool,
    seen: &mut Vec<Vec<u8>>,
) {
    loop {
        let mut frames = Vec::new();
        for ep in eps.iter_mut() {
            while let Some(mp) = ep.s.device_output() {
                let f = mp.to_vec();
                seen.push(f.clone());
                frames.extend(link.carry(f));
            }
        }
        frames.extend(link.flush());
        if frames.is_empty() {
            return;
        }
        for f in frames {
            let (node, port) = (f.get(8).copied(), f.get(10).copied());
            if let Some(ep) = eps
                .iter_mut()
                .find(|e| Some(e.addr.node) == node && Some(e.addr.socket) == port)
            {
                ep.s.device_input(mkmsg(pool, MsgType::Data, &f).unwrap());
            }
        }
    }
}

/// The next indication at the head: its source, record and data.
pub fn indication(ep: &mut Endpoint) -> Option<(TAddr, AtpService, Vec<u8>)> {
    let mp = ep.s.getmsg().unwrap()?;
    let Some(Tpi::UnitdataInd { src, opt }) = Tpi::of(&mp) else {
        panic!("T_UNITDATA_IND, got {:?}", Tpi::of(&mp))
    };
    let data = mp.cont().map(|d| d.to_vec()).unwrap_or_default();
    Some((src, AtpService::decode(&opt).expect("an ATP record"), data))
}

/// The reply a server gives to a request: three responses' worth.
pub fn reply_for(req: &[u8]) -> Vec<u8> {
    (0..1200)
        .map(|i| req[i % req.len()].wrapping_add(i as u8))
        .collect()
}

/// `n` exactly-once transactions from a `client` stream to a `server` one
/// over a link losing, duplicating and reordering `percent`% of datagrams.
pub fn run_transactions(client: Recipe, server: Recipe, percent: u32, seed: u64, n: usize) {
    let pool = Dblks::pool(100_000);
    let mut client = open(client, &pool, 1, 0);
    let mut server = open(server, &pool, 2, 200);
    let mut link = Link::new(seed, percent);
    let mut seen = Vec::new();
    let mut expected = HashMap::new();
    for i in 0..n {
        let data = format!("request {i}").into_bytes();
        let rec = AtpService::SendRequest {
            xo: Some(TRelTimeout::Sec30),
            bitmap: 0xff,
            retries: RETRY_FOREVER,
            interval: 5,
            user: (i as u32).to_be_bytes(),
        };
        client.send(server.addr, rec, &data).unwrap();
        expected.insert((i as u32).to_be_bytes(), reply_for(&data));
        exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
    }
    let mut served: HashMap<(TAddr, u16), u32> = HashMap::new();
    let mut done = HashMap::new();
    let mut now = Duration::ZERO;
    while done.len() < n && now < Duration::from_secs(600) {
        while let Some((src, rec, data)) = indication(&mut server) {
            let AtpService::RequestInd { tid, .. } = rec else {
                panic!("a request, got {rec:?}")
            };
            *served.entry((src, tid)).or_default() += 1;
            let rsp = AtpService::SendResponse { tid, user: [0; 4] };
            server.send(src, rsp, &reply_for(&data)).unwrap();
            exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
        }
        while let Some((_, rec, data)) = indication(&mut client) {
            let AtpService::ResponseInd { user, segments, .. } = rec else {
                panic!("a response, got {rec:?}")
            };
            assert_eq!(segments, 3);
            assert_eq!(
                Some(&data),
                expected.get(&user),
                "the reply is the one for its request"
            );
            assert!(
                done.insert(user, ()).is_none(),
                "a transaction completes once"
            );
        }
        now += Duration::from_millis(100);
        client.s.advance_to(now);
        server.s.advance_to(now);
        exchange(&mut [&mut client, &mut server], &mut link, &pool, &mut seen);
    }
    assert_eq!(
        done.len(),
        n,
        "every transaction completed at {percent}% loss"
    );
    assert!(
        served.values().all(|&c| c == 1),
        "exactly once: the server's user saw each request once"
    );
    assert_eq!(served.len(), n);
    for f in &seen {
        let h = Header::new_checked(&f[..]).expect("a DDP header");
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.length, f.len());
        assert!(ddp::verify(&h, [&f[ddp::HEADER_LEN..]]), "checksum holds");
        assert_eq!(r.ddp_type, 3);
    }
    if percent >= 5 {
        let retries: u64 = client
            .s
            .modules()
            .iter()
            .flat_map(|m| client.s.counters(m))
            .filter(|(k, _)| *k == "retries")
            .map(|(_, v)| v)
            .sum();
        assert!(retries > 0, "losses were recovered by retries");
    }
}
