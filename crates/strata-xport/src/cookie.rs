//! Set-up cookies: the listener's answer to a first `CONNECT` carries a
//! cookie that only a client receiving at its address can echo, so no state
//! is kept and no large reply is sent before the address is proven.
//!
//! A cookie is a 32-bit time bucket and a 96-bit keyed hash (SipHash-2-4,
//! two keys, the function TCP's ISNs use) of the bucket, the client's address and its connection id. It
//! is valid for the bucket it was made in and the one before.

use std::net::SocketAddr;

use strata_proto::tcp::isn::siphash24;

use crate::wire::COOKIE_LEN;

/// Makes and checks cookies under a secret key.
pub(crate) struct CookieJar {
    keys: [[u64; 2]; 2],
}

impl CookieJar {
    pub(crate) fn new(keys: [[u64; 2]; 2]) -> Self {
        CookieJar { keys }
    }

    fn mac(&self, bucket: u32, from: SocketAddr, client_id: u64) -> [u8; 12] {
        let mut msg = Vec::with_capacity(32);
        msg.extend_from_slice(&bucket.to_be_bytes());
        match from.ip() {
            std::net::IpAddr::V4(a) => msg.extend_from_slice(&a.octets()),
            std::net::IpAddr::V6(a) => msg.extend_from_slice(&a.octets()),
        }
        msg.extend_from_slice(&from.port().to_be_bytes());
        msg.extend_from_slice(&client_id.to_be_bytes());
        let a = siphash24(self.keys[0][0], self.keys[0][1], &msg);
        let b = siphash24(self.keys[1][0], self.keys[1][1], &msg);
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&a.to_be_bytes());
        out[8..].copy_from_slice(&b.to_be_bytes()[..4]);
        out
    }

    /// The cookie for `from` and its connection id in time bucket `bucket`.
    pub(crate) fn make(&self, bucket: u32, from: SocketAddr, client_id: u64) -> [u8; COOKIE_LEN] {
        let mut c = [0u8; COOKIE_LEN];
        c[..4].copy_from_slice(&bucket.to_be_bytes());
        c[4..].copy_from_slice(&self.mac(bucket, from, client_id));
        c
    }

    /// Whether `cookie` was made for `from` and the id in `bucket` or the one before.
    pub(crate) fn check(
        &self,
        cookie: &[u8; COOKIE_LEN],
        bucket: u32,
        from: SocketAddr,
        client_id: u64,
    ) -> bool {
        let made = u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]]);
        if made != bucket && made.wrapping_add(1) != bucket {
            return false;
        }
        // Not constant-time: the 96-bit value is per address and expires in
        // seconds, so timing reveals nothing reusable.
        cookie[4..] == self.mac(made, from, client_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_bound_to_address_id_and_time() {
        let jar = CookieJar::new([[1, 2], [3, 4]]);
        let a: SocketAddr = "198.18.0.1:5000".parse().unwrap();
        let b: SocketAddr = "198.18.0.2:5000".parse().unwrap();
        let c = jar.make(10, a, 7);
        assert!(jar.check(&c, 10, a, 7));
        assert!(jar.check(&c, 11, a, 7), "one bucket late is fine");
        assert!(!jar.check(&c, 12, a, 7), "two is stale");
        assert!(!jar.check(&c, 10, b, 7));
        assert!(!jar.check(&c, 10, a, 8));
    }
}
