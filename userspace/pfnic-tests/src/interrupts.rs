//! The MSI-X interrupt path, end to end, on every vector.

use crate::common::{cookie, nic};
use crate::ktap::{Test, TestResult};
use pfnic_cli::outln;
use pfnic_sys::pci;
use std::sync::Arc;

pub const TESTS: &[&Test] = &[
    &Test {
        name: "test_msix_remapped",
        run: test_msix_remapped,
    },
    &Test {
        name: "test_selftest_every_vector",
        run: test_selftest_every_vector,
    },
    &Test {
        name: "test_selftest_concurrent",
        run: test_selftest_concurrent,
    },
];

/// Every vector is an MSI-X interrupt delivered through the IOMMU's interrupt remapping.
fn test_msix_remapped() -> TestResult {
    let n = nic()?;
    let q = n.dev.query()?;
    let lines = pci::msix_lines(&n.bdf)?;
    check_eq!(lines.len(), q.num_vectors as usize);
    for l in &lines {
        check!(l.contains("IR-PCI-MSIX"), "not remapped: {l}");
        check!(
            l.trim_end().ends_with("pfnic"),
            "not the pfnic handler: {l}"
        );
    }
    Ok(())
}

/// A self-test on vector v: the device echoes the cookie, and exactly vector v's interrupt count
/// in /proc/interrupts (the kernel's own accounting) goes up by one.
fn test_selftest_every_vector() -> TestResult {
    let n = nic()?;
    let q = n.dev.query()?;
    let mut lat = Vec::new();
    for v in 0..q.num_vectors {
        let before = pci::msix_counts(&n.bdf)?;
        let c = cookie();
        let r = n.dev.selftest(v, c)?;
        let after = pci::msix_counts(&n.bdf)?;
        check_eq!(r.echo, !c);
        check_eq!(after.len(), q.num_vectors as usize);
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            let want = if i == v as usize { b + 1 } else { *b };
            check!(
                *a == want,
                "vector {v}: /proc/interrupts count of vector {i} went {b} -> {a}"
            );
        }
        check!(
            r.interrupts >= 1,
            "driver counted no interrupt on vector {v}"
        );
        lat.push(r.latency_ns);
    }
    lat.sort();
    outln!(
        "# interrupt round trip over {} vectors: median {} us",
        lat.len(),
        lat[lat.len() / 2] / 1000
    );
    Ok(())
}

/// Self-tests from several threads at once all complete: the driver serializes them.
fn test_selftest_concurrent() -> TestResult {
    let n = Arc::new(nic()?);
    let vectors = n.dev.query()?.num_vectors;
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let n = n.clone();
            std::thread::spawn(move || -> Result<(), String> {
                for i in 0..25u32 {
                    let c = cookie() ^ (t << 24) ^ i;
                    let r = n
                        .dev
                        .selftest((t + i) % vectors, c)
                        .map_err(|e| e.to_string())?;
                    if r.echo != !c {
                        return Err(format!(
                            "thread {t} iteration {i}: echo {:#x} for cookie {c:#x}",
                            r.echo
                        ));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| "thread panicked")??;
    }
    Ok(())
}
