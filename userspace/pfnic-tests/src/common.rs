//! Shared setup: find the one pfnic under test; helpers every test module uses.

use crate::ktap::Failure;
use pfnic_sys::pci;
use pfnic_sys::Device;

/// The first pfnic: its PCI address and an open handle on its character device.
pub struct Nic {
    pub bdf: String,
    pub dev: Device,
}

pub fn nic() -> Result<Nic, Failure> {
    let bdf = match pci::functions()?.into_iter().next() {
        Some(b) => b,
        None => return Err(Failure::Fail("no pfnic PCI function in the guest".into())),
    };
    let path = pfnic_sys::devices()?.into_iter().next().ok_or_else(|| {
        Failure::Fail(format!(
            "{bdf} has no /dev/pfnicN (driver: {:?})",
            pci::driver(&bdf)
        ))
    })?;
    let dev = Device::open(&path).map_err(|e| Failure::Fail(format!("open {path:?}: {e}")))?;
    Ok(Nic { bdf, dev })
}

/// Whether this is a soak run (`PFNIC_SOAK=1` on the host, `pfnic_guest.soak=1` in the guest):
/// the lifecycle and fault matrix tests then run the iteration counts of a nightly run (1000
/// kills, 1000 unbinds) instead of `make test`'s.
pub fn soak() -> bool {
    std::env::var_os("PFNIC_SOAK").is_some_and(|v| v == "1")
}

/// `normal` iterations, or `soak` in a soak run ([`soak`]).
pub fn iterations(normal: usize, soak_count: usize) -> usize {
    if soak() {
        soak_count
    } else {
        normal
    }
}

/// A cookie that differs from run to run, so a stale echo cannot pass.
pub fn cookie() -> u32 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_nsec as u32).rotate_left(13) ^ 0xa5a5_0f0f ^ (t.tv_sec as u32)
}

/// Whether this guest's platform can do SVA for the pfnic at `bdf`: it advertises PRI.
pub fn platform_has_pri(bdf: &str) -> Result<bool, Failure> {
    Ok(pci::Config::read(bdf)?.ext_cap(pci::EXT_CAP_PRI).is_some())
}

/// The pfnic under test, on a platform that can bind address spaces and fault pages in (else
/// the test skips).
pub fn sva_nic() -> Result<Nic, Failure> {
    let n = nic()?;
    if !platform_has_pri(&n.bdf)? {
        return Err(Failure::Skip("no PRI on this platform".into()));
    }
    Ok(n)
}

/// Hardware contexts the driver holds itself for the pfnic at `bdf`: one for the RDMA core's
/// kernel clients (ib_mad's QP1, rdma_cm) while its RDMA device is registered, none otherwise.
pub fn driver_contexts(bdf: &str) -> Result<u32, Failure> {
    let mut n = 0;
    for entry in std::fs::read_dir("/sys/class/infiniband")? {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().starts_with("pfnic") {
            continue;
        }
        // The RDMA device's parent is the auxiliary device, a child of the PCI function.
        let dev = std::fs::canonicalize(entry.path().join("device"))?;
        if dev.components().any(|c| c.as_os_str() == bdf) {
            n += 1;
        }
    }
    Ok(n)
}

/// The guest kernel's log.
pub fn dmesg() -> Result<String, Failure> {
    let out = std::process::Command::new("dmesg").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A forked child process running test code. Killed and reaped on drop if still there.
pub struct Child(Option<libc::pid_t>);

impl Child {
    /// Forks; the child runs `f` and exits with its return value.
    pub fn spawn(f: impl FnOnce() -> i32) -> Result<Self, Failure> {
        // SAFETY: the test binary forks from a single thread; the child only runs `f` (our own
        // code) and leaves with _exit, without the parent's atexit handlers.
        match unsafe { libc::fork() } {
            -1 => Err(Failure::Fail(format!(
                "fork: {}",
                std::io::Error::last_os_error()
            ))),
            0 => {
                let code = f();
                // SAFETY: ends the child.
                unsafe { libc::_exit(code) }
            }
            pid => Ok(Self(Some(pid))),
        }
    }

    /// Reaps the child if it has ended: its exit status as [`Child::wait`] gives it.
    pub fn try_wait(&mut self) -> Result<Option<i32>, Failure> {
        self.reap(libc::WNOHANG)
    }

    /// Sends SIGKILL.
    pub fn kill(&self) {
        if let Some(pid) = self.0 {
            // SAFETY: signals our own, not yet reaped, child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    /// Waits for the child: its exit code, or 128 + the signal that ended it.
    pub fn wait(mut self) -> Result<i32, Failure> {
        self.reap(0)?
            .ok_or_else(|| Failure::Fail("the child was already reaped".into()))
    }

    fn reap(&mut self, flags: libc::c_int) -> Result<Option<i32>, Failure> {
        let Some(pid) = self.0 else {
            return Ok(None);
        };
        let mut status = 0;
        // SAFETY: waits for our own child.
        match unsafe { libc::waitpid(pid, &mut status, flags) } {
            0 => Ok(None),
            r if r == pid => {
                self.0 = None;
                Ok(Some(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                }))
            }
            _ => Err(Failure::Fail(format!(
                "waitpid: {}",
                std::io::Error::last_os_error()
            ))),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
        let _ = self.reap(0);
    }
}

/// Runs `f` in a forked child and returns its exit status (0 = success).
pub fn in_child(f: impl FnOnce() -> i32) -> Result<i32, Failure> {
    Child::spawn(f)?.wait()
}

/// Runs a program: whether it succeeded, and its output (stdout then stderr).
pub fn sh(cmd: &str, args: &[&str]) -> Result<(bool, String), Failure> {
    let out = std::process::Command::new(cmd).args(args).output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok((out.status.success(), text))
}

/// The size in kB that `key` (e.g. "VmPin:", "MemFree:") has in `/proc/<file>`.
fn proc_kb(file: &str, key: &str) -> Result<u64, Failure> {
    let text = std::fs::read_to_string(format!("/proc/{file}"))?;
    let line = text
        .lines()
        .find(|l| l.starts_with(key))
        .ok_or_else(|| format!("no {key} in /proc/{file}"))?;
    Ok(line.split_whitespace().nth(1).unwrap_or("?").parse()?)
}

/// The "VmPin" line of /proc/self/status, in kB.
pub fn vm_pinned_kb() -> Result<u64, Failure> {
    proc_kb("self/status", "VmPin:")
}

/// A line of /proc/meminfo (`key` with its colon, e.g. "MemFree:"), in kB.
pub fn meminfo_kb(key: &str) -> Result<u64, Failure> {
    proc_kb("meminfo", key)
}

/// The errno of an `io::Result`, or a failure if it succeeded.
fn errno_of<T>(what: &str, r: std::io::Result<T>) -> Result<i32, Failure> {
    match r {
        Ok(_) => Err(Failure::Fail(format!(
            "{what} succeeded, expected an error"
        ))),
        Err(e) => Ok(e.raw_os_error().unwrap_or(-1)),
    }
}

/// Fails unless `r` failed with `want`.
pub fn expect_errno<T>(what: &str, r: std::io::Result<T>, want: i32) -> Result<(), Failure> {
    let got = errno_of(what, r)?;
    if got != want {
        return Err(Failure::Fail(format!(
            "{what}: {}, expected {}",
            std::io::Error::from_raw_os_error(got),
            std::io::Error::from_raw_os_error(want)
        )));
    }
    Ok(())
}

/// A pipe: (read end, write end), for two processes of a test to talk.
pub fn pipe() -> Result<(std::fs::File, std::fs::File), Failure> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(Failure::Fail(format!(
            "pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// Unbinds PCI function `bdf` from the pfnic driver (`/sys/bus/pci/drivers/pfnic/unbind`).
pub fn unbind(bdf: &str) -> Result<(), Failure> {
    std::fs::write("/sys/bus/pci/drivers/pfnic/unbind", bdf)
        .map_err(|e| Failure::Fail(format!("unbind {bdf}: {e}")))
}

/// Binds PCI function `bdf` to the pfnic driver again.
pub fn bind(bdf: &str) -> Result<(), Failure> {
    std::fs::write("/sys/bus/pci/drivers/pfnic/bind", bdf)
        .map_err(|e| Failure::Fail(format!("bind {bdf}: {e}")))
}

/// The `/proc/self/pagemap` entry of the page holding `addr` (Documentation/admin-guide/mm/
/// pagemap.rst): bit 63 present, bit 57 uffd write-protected, bits 0..54 the page frame
/// (visible to root only).
pub fn pagemap(addr: u64) -> Result<u64, Failure> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap")?;
    let mut e = [0u8; 8];
    f.read_exact_at(&mut e, addr / 4096 * 8)?;
    Ok(u64::from_le_bytes(e))
}

/// Whether a pagemap entry says the page is present.
pub fn pm_present(entry: u64) -> bool {
    entry >> 63 == 1
}

/// The page frame number of a pagemap entry (0 when not present).
pub fn pm_pfn(entry: u64) -> u64 {
    entry & ((1 << 55) - 1)
}

/// What a [`spawn_event_reader`] thread's `read()` returned: the byte count (or -1), the errno,
/// and the bytes read.
pub type EventRead = (isize, Option<i32>, [u8; 16]);

/// A thread that blocks in `read()` of one 16-byte completion event from a duplicate of `fd`
/// (a completion channel), which it closes afterwards.
pub fn spawn_event_reader(
    fd: std::os::fd::RawFd,
) -> Result<std::thread::JoinHandle<EventRead>, Failure> {
    // SAFETY: dup() of a descriptor of ours; the thread closes the copy.
    let fd = unsafe { libc::dup(fd) };
    if fd < 0 {
        fail!("dup: {}", std::io::Error::last_os_error());
    }
    Ok(std::thread::spawn(move || {
        let mut ev = [0u8; 16];
        // SAFETY: `ev` is 16 writable bytes; `fd` is ours.
        let n = unsafe { libc::read(fd, ev.as_mut_ptr().cast(), ev.len()) };
        let e = std::io::Error::last_os_error().raw_os_error();
        // SAFETY: ours, used no more.
        unsafe { libc::close(fd) };
        (n, e, ev)
    }))
}

/// The result of `thread` if it ends within `timeout` (else a failure saying `what`).
pub fn join_within<T>(
    thread: std::thread::JoinHandle<T>,
    timeout: std::time::Duration,
    what: &str,
) -> Result<T, Failure> {
    let deadline = std::time::Instant::now() + timeout;
    while !thread.is_finished() {
        if std::time::Instant::now() >= deadline {
            fail!("{what} within {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    thread
        .join()
        .map_err(|_| Failure::Fail(format!("{what}: the thread panicked")))
}

/// Makes sure some swap is active: a zram device, set up once.
pub fn ensure_swap() -> Result<(), Failure> {
    let swaps = std::fs::read_to_string("/proc/swaps")?;
    if swaps.lines().count() > 1 {
        return Ok(());
    }
    std::fs::write("/sys/block/zram0/disksize", "256M")
        .map_err(|e| Failure::Fail(format!("zram0 disksize: {e}")))?;
    for cmd in ["mkswap", "swapon"] {
        let (ok, out) = sh(cmd, &["/dev/zram0"])?;
        if !ok {
            return Err(Failure::Fail(format!("{cmd}: {out}")));
        }
    }
    Ok(())
}

/// Pages of `[addr, addr + len)` (page aligned, the caller's own mapping) resident in memory,
/// by mincore().
pub fn resident_pages(addr: usize, len: usize) -> Result<usize, Failure> {
    let mut vec = vec![0u8; len.div_ceil(4096)];
    // SAFETY: `vec` has one byte per page of the range, which the caller has mapped.
    if unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) } != 0 {
        return Err(Failure::Fail(format!(
            "mincore: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(vec.iter().filter(|b| **b & 1 != 0).count())
}

/// Pushes every page of `[addr, addr + len)` (the caller's own mapping) out to swap, or fails
/// saying how many stayed. The pages a device faulted in were added to the LRU by a fault
/// worker, possibly on another CPU, whose per-CPU batch MADV_PAGEOUT does not drain:
/// compaction drains every CPU's.
pub fn page_out(addr: usize, len: usize) -> Result<(), Failure> {
    let mut resident = 0;
    for _ in 0..5 {
        let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
        // SAFETY: advice on the caller's own mapping; swapped-out pages keep their bytes.
        if unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_PAGEOUT) } != 0 {
            return Err(Failure::Fail(format!(
                "madvise(MADV_PAGEOUT): {}",
                std::io::Error::last_os_error()
            )));
        }
        resident = resident_pages(addr, len)?;
        if resident == 0 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(Failure::Fail(format!(
        "{resident} pages could not be paged out (pinned?)"
    )))
}

/// The value of `key` in the driver's debugfs statistics of the first pfnic.
pub fn debugfs_stat(key: &str) -> Result<u64, Failure> {
    let text = std::fs::read_to_string("/sys/kernel/debug/pfnic0/stats")?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .ok_or_else(|| Failure::Fail(format!("no {key} in /sys/kernel/debug/pfnic0/stats")))
}

/// Whether a socket listens on TCP `port` (`/proc/net/tcp`, state 0A).
pub fn tcp_listening(port: u16) -> Result<bool, Failure> {
    let tcp = std::fs::read_to_string("/proc/net/tcp")?
        + &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    let local = format!(":{port:04X}");
    Ok(tcp.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1].ends_with(&local) && f[3] == "0A"
    }))
}
