//! `ident`: the connection identification of the paper's test stack — who
//! sends, to whom, for which application. All of it is the connection
//! identification class (§2.1): with the PA it travels only until the peer
//! has the cookie, and on unusual messages; without it, on every message.

use strata_core::Message;

use crate::field::{Class, FieldHandle, LayoutBuilder};
use crate::layer::{Check, Ctx, Layer, Verdict, View, ViewMut};

/// The identification layer of one connection.
pub struct Ident {
    local: u64,
    remote: u64,
    app: u32,
    h: Option<[FieldHandle; 3]>,
}

impl Ident {
    /// A connection from `local` to `remote` (e.g. link addresses as
    /// numbers) for application `app`.
    pub fn new(local: u64, remote: u64, app: u32) -> Ident {
        Ident {
            local,
            remote,
            app,
            h: None,
        }
    }
}

impl Layer for Ident {
    fn name(&self) -> &'static str {
        "ident"
    }

    fn declare(&mut self, f: &mut LayoutBuilder) {
        self.h = Some([
            f.add_field(Class::ConnId, "src", 64, None),
            f.add_field(Class::ConnId, "dst", 64, None),
            f.add_field(Class::ConnId, "app", 32, None),
        ]);
    }

    /// The identification never changes.
    fn prediction_varies(&self) -> bool {
        false
    }

    fn pre_send(&self, h: &mut ViewMut, _: &Message) -> Verdict {
        if let Some([src, dst, app]) = self.h {
            h.set(src, self.local);
            h.set(dst, self.remote);
            h.set(app, u64::from(self.app));
        }
        Verdict::Pass
    }

    fn post_send(&mut self, _: View, _: &mut Message, _: bool, _: &mut Ctx) {}

    fn pre_deliver(&self, h: View, _: &Message) -> Check {
        if self.accepts_ident(h) {
            Check::Pass
        } else {
            Check::Drop("wrong-connection")
        }
    }

    fn post_deliver(&mut self, _: View, _: &Message, _: bool, _: &mut Ctx) {}

    fn post_processes(&self) -> bool {
        false
    }

    fn accepts_ident(&self, h: View) -> bool {
        let Some([src, dst, app]) = self.h else {
            return false;
        };
        h.get(src) == self.remote && h.get(dst) == self.local && h.get(app) == u64::from(self.app)
    }
}
