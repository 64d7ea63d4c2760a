//! Opening a driver's descriptor inside a named network namespace.
//!
//! A socket or TAP descriptor belongs to the namespace it was created in for
//! its whole life, whatever thread later uses it (network_namespaces(7)). So a
//! process in one namespace can drive links in several: [`within`] moves the
//! calling thread into the namespace `ip netns add` made
//! (`/var/run/netns/NAME`), runs the setup, and moves it back.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::sys;

/// Where iproute2 keeps named namespaces (ip-netns(8)).
const NETNS_DIR: &str = "/var/run/netns";

/// Checks a namespace name as `ip netns` accepts it: a file name.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        Err(format!("'{name}' is not a network namespace name"))
    } else {
        Ok(())
    }
}

/// Runs `f` with the calling thread in network namespace `name` (when given),
/// then returns the thread to the namespace it was in, even when `f` fails.
pub fn within<T>(name: Option<&str>, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let Some(name) = name else {
        return f();
    };
    check_name(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let path = PathBuf::from(NETNS_DIR).join(name);
    let target = File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace {}: {e}", path.display()),
        )
    })?;
    // The thread's own namespace (not the process's: another setns may have
    // moved this thread before).
    let home = File::open("/proc/thread-self/ns/net")?;
    sys::enter_net_namespace(target.as_raw_fd())?;
    let result = f();
    // Going home cannot fail for a namespace we were just in, short of the
    // capability being dropped meanwhile; a thread left in the wrong namespace
    // would open later sockets there, so that is an error too.
    sys::enter_net_namespace(home.as_raw_fd())?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_name_the_setup_runs_where_the_thread_is() {
        assert_eq!(within(None, || Ok(7)).unwrap(), 7);
    }

    #[test]
    fn names_that_are_not_file_names_are_refused() {
        for bad in ["", "a/b", "..", "."] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("strata-1234-a").is_ok());
        let err = within(Some("../etc"), || Ok(())).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_missing_namespace_is_an_error_naming_it() {
        let err = within(Some("strata-no-such-namespace"), || Ok(())).unwrap_err();
        assert!(
            err.to_string().contains("strata-no-such-namespace"),
            "{err}"
        );
    }
}
