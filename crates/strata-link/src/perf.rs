//! The processor's count of retired instructions for the calling thread,
//! through perf_event_open(2) — what the benchmarks print beside time,
//! since instructions do not move with the machine's load as time does.
//!
//! Virtual machines often expose no hardware counters (`perf stat -e
//! instructions` then says "not supported"); [`Instructions::new`] then
//! fails with the kernel's reason, and the benchmarks say so and point at
//! `scripts/instructions`, which counts with callgrind instead.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `PERF_TYPE_HARDWARE` (include/uapi/linux/perf_event.h).
const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_COUNT_HW_INSTRUCTIONS`.
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
/// `PERF_FLAG_FD_CLOEXEC`, which libc does not export.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `perf_event_attr` flag bits: `exclude_kernel` (bit 5) and `exclude_hv`
/// (bit 6), so only this thread's user-space work is counted.
const EXCLUDE_KERNEL_AND_HV: u64 = (1 << 5) | (1 << 6);

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER5` (112 bytes); the
/// kernel accepts any published size and zero-extends it.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

/// A running count of the instructions this thread retires in user space.
pub struct Instructions {
    fd: OwnedFd,
}

impl Instructions {
    /// Starts counting for the calling thread; fails where the machine has no
    /// hardware counter (or the kernel forbids it: `perf_event_paranoid`).
    pub fn new() -> io::Result<Instructions> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_INSTRUCTIONS,
            flags: EXCLUDE_KERNEL_AND_HV,
            ..PerfEventAttr::default()
        };
        // SAFETY: `attr` is a valid, fully initialised perf_event_attr of the
        // size it declares, alive for the call; pid 0 and cpu -1 count this
        // thread on any CPU, group -1 makes a new group, and the kernel reads
        // the struct without keeping the pointer.
        #[allow(unsafe_code)]
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel has just returned `fd` as a new descriptor that
        // nothing else owns.
        #[allow(unsafe_code)]
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Instructions { fd })
    }

    /// Instructions counted since [`new`](Self::new).
    pub fn read(&self) -> io::Result<u64> {
        let mut value = 0u64;
        // SAFETY: the descriptor is open (owned by `self`), and `value` is 8
        // writable bytes, what a counter without read_format flags returns.
        #[allow(unsafe_code)]
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut value as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if n != std::mem::size_of::<u64>() as isize {
            return Err(io::Error::last_os_error());
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_has_the_published_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    fn a_counter_counts_up_or_the_machine_says_why_not() {
        match Instructions::new() {
            Ok(c) => {
                let a = c.read().unwrap();
                let sum: u64 = (0..10_000u64).map(std::hint::black_box).sum();
                assert_eq!(sum, 49_995_000);
                assert!(c.read().unwrap() > a + 10_000);
            }
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }
}
