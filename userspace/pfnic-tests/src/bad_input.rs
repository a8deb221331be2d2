//! Bad ioctl input gets a precise errno and leaves the device working.

use crate::common::{cookie, expect_errno, nic};
use crate::ktap::{Test, TestResult};
use pfnic_sys::{uapi, Device, Selftest};

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_ioctl_unknown_enotty",
        run: test_ioctl_unknown_enotty,
    },
    &Test {
        name: "test_ioctl_bad_pointer_efault",
        run: test_ioctl_bad_pointer_efault,
    },
    &Test {
        name: "test_selftest_bad_args_einval",
        run: test_selftest_bad_args_einval,
    },
];

const fn ioc(dir: u32, ty: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (ty << 8) | nr
}

/// The device still answers after the bad calls.
fn still_works(dev: &Device) -> TestResult {
    let c = cookie();
    check_eq!(dev.selftest(0, c)?.echo, !c);
    check_eq!(dev.query()?.uapi_version, uapi::PFNIC_UAPI_VERSION);
    Ok(())
}

fn test_ioctl_unknown_enotty() -> TestResult {
    let n = nic()?;
    let mut buf = [0u8; 256];
    let p = buf.as_mut_ptr().cast();
    let q = uapi::PFNIC_IOCTL_QUERY_DEVICE;
    let cases = [
        ("unknown number", ioc(0, 0xf5, 0x7f, 0)),
        (
            "query with a smaller struct",
            (q & !(0x3fff << 16)) | (8 << 16),
        ),
        (
            "query with a larger struct",
            (q & !(0x3fff << 16)) | (200 << 16),
        ),
        ("query as _IOW", (q & !(3 << 30)) | (1 << 30)),
        ("another driver's magic", (q & !(0xff << 8)) | (0x54 << 8)),
        ("TCGETS", libc::TCGETS as u32),
    ];
    // The verbs objects' ioctls uAPI 21 retired, with their argument sizes in uAPI 20: the
    // numbers a program built against uAPI 20 would send.
    let (r, w, rw) = (2, 1, 3);
    let retired = [
        ("ALLOC_PD", r, 0x07, 8),
        ("DEALLOC_PD", w, 0x08, 8),
        ("REG_MR", rw, 0x09, 40),
        ("DEREG_MR", w, 0x0a, 8),
        ("ADVISE_MR", w, 0x0b, 144),
        ("QUERY_MR", rw, 0x0c, 80),
        ("CREATE_CQ", rw, 0x0d, 56),
        ("DESTROY_CQ", rw, 0x0e, 8),
        ("CREATE_QP", rw, 0x0f, 104),
        ("MODIFY_QP", w, 0x10, 120),
        ("QUERY_QP", rw, 0x11, 232),
        ("DESTROY_QP", rw, 0x12, 8),
        ("CREATE_COMP_CHANNEL", r, 0x14, 8),
        ("SET_MEM_MODE", w, 0x15, 8),
        ("GET_ASYNC_FD", r, 0x16, 8),
        ("CREATE_SRQ", rw, 0x17, 56),
        ("MODIFY_SRQ", w, 0x18, 16),
        ("QUERY_SRQ", rw, 0x19, 32),
        ("DESTROY_SRQ", rw, 0x1a, 8),
        ("ALLOC_DM", rw, 0x1b, 32),
        ("FREE_DM", w, 0x1c, 8),
        ("REG_DM_MR", rw, 0x1d, 48),
    ];
    let retired = retired
        .iter()
        .map(|&(what, dir, nr, size)| (what, ioc(dir, 0xf5, nr, size as u32)));
    let cases = cases.into_iter().chain(retired);
    for (what, cmd) in cases {
        // SAFETY: `buf` is large enough for any of these sizes; the kernel must not touch it.
        let r = unsafe { n.dev.ioctl(cmd, p) };
        expect_errno(&format!("{what} ({cmd:#x})"), r, libc::ENOTTY)?;
    }
    check_eq!(buf, [0u8; 256]);
    still_works(&n.dev)
}

fn test_ioctl_bad_pointer_efault() -> TestResult {
    let n = nic()?;
    // A page that was mapped and is not any more, and a read-only page.
    // SAFETY: plain anonymous mmap/munmap of memory nothing else uses.
    let (gone, ro) = unsafe {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let gone = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        );
        let ro = libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, flags, -1, 0);
        if gone == libc::MAP_FAILED || ro == libc::MAP_FAILED {
            fail!("mmap failed");
        }
        libc::munmap(gone, 4096);
        (gone, ro)
    };
    let kernel = 0xffff_8000_0000_0000_usize as *mut libc::c_void;
    for (what, p) in [
        ("NULL", std::ptr::null_mut()),
        ("unmapped", gone),
        ("kernel address", kernel),
    ] {
        for cmd in [uapi::PFNIC_IOCTL_QUERY_DEVICE, uapi::PFNIC_IOCTL_SELFTEST] {
            // SAFETY: the kernel must reject these pointers; nothing of ours is behind them.
            let r = unsafe { n.dev.ioctl(cmd, p) };
            expect_errno(&format!("{what} pointer, cmd {cmd:#x}"), r, libc::EFAULT)?;
        }
    }
    // Readable but not writable: QUERY cannot copy out.
    // SAFETY: as above; `ro` is ours and read-only.
    let r = unsafe { n.dev.ioctl(uapi::PFNIC_IOCTL_QUERY_DEVICE, ro) };
    expect_errno("query into a read-only page", r, libc::EFAULT)?;
    // SAFETY: `ro` was mapped above.
    unsafe { libc::munmap(ro, 4096) };
    still_works(&n.dev)
}

fn test_selftest_bad_args_einval() -> TestResult {
    let n = nic()?;
    let vectors = n.dev.query()?.num_vectors;
    let cases = [
        (
            "vector == num_vectors",
            Selftest {
                vector: vectors,
                ..Default::default()
            },
        ),
        (
            "vector u32::MAX",
            Selftest {
                vector: u32::MAX,
                ..Default::default()
            },
        ),
        (
            "flags set",
            Selftest {
                flags: 1,
                ..Default::default()
            },
        ),
    ];
    for (what, mut arg) in cases {
        let before = arg;
        // SAFETY: `arg` is a valid `Selftest`.
        let r = unsafe {
            n.dev
                .ioctl(uapi::PFNIC_IOCTL_SELFTEST, (&raw mut arg).cast())
        };
        expect_errno(what, r, libc::EINVAL)?;
        // Nothing is written back on failure.
        check_eq!(arg.echo, before.echo);
        check_eq!(arg.latency_ns, before.latency_ns);
    }
    still_works(&n.dev)
}
