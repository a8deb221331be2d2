//! The device's admin commands are declared twice: in the device's `pfnic_cmd.h`, through
//! which it reads their arguments and writes their results, and in the driver's `cmd_abi.rs`.
//! This test compiles the header with the C compiler against what `cmd_abi.rs` says: every
//! structure's size and field offsets, and every command's opcode, must agree, or it fails.

use std::fmt::Write as _;
use std::path::Path;

#[path = "../../../drivers/pfnic/cmd_abi.rs"]
#[allow(dead_code)]
mod cmd_abi;

/// `QpSetDmac` -> `QP_SET_DMAC`.
fn screaming_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// `_Static_assert`s of `cmd_abi.rs`'s layouts, for the C compiler to check against the header.
fn assertions() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include \"pfnic_regs.h\"\n\
         #include \"pfnic_cmd.h\"\n",
    );
    let mut check = |expr: String, want: usize, what: &str| {
        writeln!(
            c,
            "_Static_assert({expr} == {want}, \"{expr} is {want} in cmd_abi.rs ({what})\");"
        )
        .unwrap();
    };
    check(
        "sizeof(PfnicCmdArgs)".into(),
        cmd_abi::CMD_WORDS * 4,
        "CMD_WORDS",
    );
    for l in cmd_abi::LAYOUTS {
        check(format!("sizeof({})", l.c_name), 4 * l.fields.len(), l.name);
        for (i, f) in l.fields.iter().enumerate() {
            check(format!("offsetof({}, {f})", l.c_name), 4 * i, l.name);
        }
        if let Some(op) = l.op {
            let name = format!("PFNIC_CMD_{}", screaming_snake(l.name));
            check(name, op as usize, l.name);
        }
    }
    c
}

#[test]
fn cmd_header_matches_cmd_abi() {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-device/hw/pfnic");
    if let Err(e) = crate::rdma_abi_check::compile_c(&include, "gnu11", &assertions()) {
        panic!("pfnic_cmd.h disagrees with cmd_abi.rs:\n{e}");
    }
}

/// Every opcode the device defines (`#define PFNIC_CMD_NAME 0xNN` in `pfnic_regs.h`; the
/// statuses are decimal) has its structure here, and no other.
#[test]
fn every_command_has_a_layout() {
    let regs =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-device/hw/pfnic/pfnic_regs.h");
    let mut device: Vec<String> = std::fs::read_to_string(regs)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next(), w.next()) {
                (Some("#define"), Some(name), Some(v))
                    if name.starts_with("PFNIC_CMD_") && v.starts_with("0x") =>
                {
                    Some(name.to_string())
                }
                _ => None,
            }
        })
        .collect();
    let mut ours: Vec<String> = cmd_abi::LAYOUTS
        .iter()
        .filter(|l| l.op.is_some())
        .map(|l| format!("PFNIC_CMD_{}", screaming_snake(l.name)))
        .collect();
    device.sort();
    ours.sort();
    assert_eq!(
        device, ours,
        "the device's opcodes against cmd_abi.rs's commands"
    );
}
