// SPDX-License-Identifier: GPL-2.0

//! The character device `/dev/pfnicN` and its ioctls.

use crate::{context::Context, nic::Nic, uapi, verbs::file::default_mem_mode};
use kernel::{
    fs::File,
    ioctl::{_IOR, _IOW, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    uaccess::{UserPtr, UserSlice, UserSliceReader, UserSliceWriter},
};
use zerocopy::{FromBytes, Immutable, IntoBytes};

// The uAPI file computes its ioctl numbers itself (user space uses it too); they must be the
// numbers the kernel's own macros give.
const _: () = assert!(
    uapi::PFNIC_IOCTL_QUERY_DEVICE == _IOR::<uapi::QueryDevice>(uapi::PFNIC_IOCTL_MAGIC, 0x00)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_SELFTEST == _IOWR::<uapi::Selftest>(uapi::PFNIC_IOCTL_MAGIC, 0x01));
const _: () = assert!(
    uapi::PFNIC_IOCTL_QUERY_CONTEXT == _IOR::<uapi::QueryContext>(uapi::PFNIC_IOCTL_MAGIC, 0x02)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_SUBMIT == _IOWR::<uapi::Submit>(uapi::PFNIC_IOCTL_MAGIC, 0x04));
const _: () = assert!(
    uapi::PFNIC_IOCTL_QUERY_STATS == _IOR::<uapi::DeviceStats>(uapi::PFNIC_IOCTL_MAGIC, 0x03)
);

const _: () = assert!(
    uapi::PFNIC_IOCTL_QUERY_VERBS == _IOR::<uapi::QueryVerbs>(uapi::PFNIC_IOCTL_MAGIC, 0x05)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_QUERY_PORT == _IOR::<uapi::QueryPort>(uapi::PFNIC_IOCTL_MAGIC, 0x06));
const _: () = assert!(
    uapi::PFNIC_IOCTL_SET_PORT_IPV4 == _IOW::<uapi::PortIpv4>(uapi::PFNIC_IOCTL_MAGIC, 0x13)
);

/// How many pfnics one system can have (`/dev/pfnic0` .. `/dev/pfnic15`).
pub(crate) const MAX_NICS: usize = 16;

/// misc device names need `'static` storage.
const NAMES: [&CStr; MAX_NICS] = [
    c"pfnic0", c"pfnic1", c"pfnic2", c"pfnic3", c"pfnic4", c"pfnic5", c"pfnic6", c"pfnic7",
    c"pfnic8", c"pfnic9", c"pfnic10", c"pfnic11", c"pfnic12", c"pfnic13", c"pfnic14", c"pfnic15",
];

/// Bitmap of the `/dev/pfnicN` indices in use.
static INDICES: Atomic<u32> = Atomic::new(0);

/// An index `N` of `/dev/pfnicN`, released when dropped.
pub(crate) struct NicIndex(u32);

impl NicIndex {
    /// Takes the lowest free index, or fails with `ENOSPC`.
    pub(crate) fn alloc() -> Result<Self> {
        let mut used = INDICES.load(Relaxed);
        loop {
            let free = (!used).trailing_zeros();
            if free as usize >= MAX_NICS {
                return Err(ENOSPC);
            }
            match INDICES.cmpxchg(used, used | (1 << free), Relaxed) {
                Ok(_) => return Ok(Self(free)),
                Err(now) => used = now,
            }
        }
    }

    pub(crate) fn get(&self) -> u32 {
        self.0
    }

    pub(crate) fn name(&self) -> &'static CStr {
        NAMES[self.0 as usize]
    }
}

impl Drop for NicIndex {
    fn drop(&mut self) {
        let mut used = INDICES.load(Relaxed);
        while let Err(now) = INDICES.cmpxchg(used, used & !(1 << self.0), Relaxed) {
            used = now;
        }
    }
}

/// Registers `/dev/pfnicN` for `nic`.
pub(crate) fn register(
    index: &NicIndex,
    nic: Arc<Nic>,
) -> impl PinInit<MiscDeviceRegistration<PfnicFile>, Error> {
    MiscDeviceRegistration::register(MiscDeviceOptions { name: index.name() }, nic)
}

/// An open `/dev/pfnicN`: the opener's hardware context, for DMA descriptors on its memory
/// (`PFNIC_IOCTL_SUBMIT`). Verbs are the RDMA core's (`pfnicN`, through uverbs).
pub(crate) struct PfnicFile {
    nic: Arc<Nic>,
    ctx: Context,
}

#[vtable]
impl MiscDevice for PfnicFile {
    type Ptr = KBox<Self>;
    type RegistrationData = Arc<Nic>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        let nic = misc.data();
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let ctx = Context::new(nic, mm)?;
        Ok(KBox::new(
            PfnicFile {
                nic: nic.clone(),
                ctx,
            },
            GFP_KERNEL,
        )?)
    }

    fn ioctl(me: &PfnicFile, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let arg = UserPtr::from_addr(arg);
        match cmd {
            uapi::PFNIC_IOCTL_QUERY_DEVICE => output(arg, || me.query_device()),
            uapi::PFNIC_IOCTL_QUERY_STATS => output(arg, || me.nic.stats()),
            uapi::PFNIC_IOCTL_SUBMIT => in_out(arg, |op| me.submit(op)),
            uapi::PFNIC_IOCTL_QUERY_CONTEXT => output(arg, || me.query_context()),
            uapi::PFNIC_IOCTL_SELFTEST => in_out(arg, |a| me.selftest(a)),
            uapi::PFNIC_IOCTL_QUERY_VERBS => output(arg, || me.nic.query_verbs()),
            uapi::PFNIC_IOCTL_QUERY_PORT => output(arg, || me.nic.query_port()),
            // The port's address is the device's, not the context's: whoever may administer
            // the network sets it (`CAP_NET_ADMIN`).
            uapi::PFNIC_IOCTL_SET_PORT_IPV4 => input(arg, |a| me.nic.set_port_ipv4(a)),
            _ => Err(ENOTTY),
        }?;
        Ok(0)
    }
}

/// Runs an ioctl whose argument is output only.
fn output<T: IntoBytes + Immutable>(arg: UserPtr, f: impl FnOnce() -> Result<T>) -> Result {
    let writer = user_slice::<T>(arg).writer();
    write_arg(writer, &f()?)
}

/// Runs an ioctl whose argument is input only.
fn input<T: FromBytes + IntoBytes>(arg: UserPtr, f: impl FnOnce(&T) -> Result) -> Result {
    let mut reader = user_slice::<T>(arg).reader();
    f(&read_arg(&mut reader)?)
}

/// Runs an ioctl whose argument is copied in, updated, and copied out on success.
fn in_out<T: FromBytes + IntoBytes + Immutable>(
    arg: UserPtr,
    f: impl FnOnce(&mut T) -> Result,
) -> Result {
    let (mut reader, writer) = user_slice::<T>(arg).reader_writer();
    let mut value: T = read_arg(&mut reader)?;
    f(&mut value)?;
    write_arg(writer, &value)
}

/// The user memory of an ioctl argument of type `T`.
fn user_slice<T>(arg: UserPtr) -> UserSlice {
    UserSlice::new(arg, size_of::<T>())
}

/// Copies an argument in, exactly once.
fn read_arg<T: FromBytes + IntoBytes>(reader: &mut UserSliceReader) -> Result<T> {
    let mut value = T::new_zeroed();
    reader.read_slice(value.as_mut_bytes())?;
    Ok(value)
}

/// Copies a result out.
fn write_arg<T: IntoBytes + Immutable>(mut writer: UserSliceWriter, value: &T) -> Result {
    writer.write_slice(value.as_bytes())
}

impl PfnicFile {
    fn query_device(&self) -> Result<uapi::QueryDevice> {
        // Fail like every other ioctl once the device is gone.
        self.nic.with_bar(|_| ())?;
        Ok(self.nic.query())
    }

    fn query_context(&self) -> Result<uapi::QueryContext> {
        self.owner_only()?;
        let mut q = self.ctx.query()?;
        // The mode a user context of this process gets unless it asks for another.
        q.mem_mode = default_mem_mode(&self.nic, self.ctx.has_pasid());
        Ok(q)
    }

    /// Context operations are for the address space that opened the file, not for a child
    /// that inherited it.
    fn owner_only(&self) -> Result {
        let task = kernel::current!();
        if self.ctx.owned_by(task.mm()) {
            Ok(())
        } else {
            Err(EPERM)
        }
    }

    fn submit(&self, op: &mut uapi::Submit) -> Result {
        self.owner_only()?;
        self.ctx.submit(op)
    }

    fn selftest(&self, arg: &mut uapi::Selftest) -> Result {
        if arg.flags != 0 || arg.vector >= self.nic.info.num_vectors {
            return Err(EINVAL);
        }
        let result = self.nic.selftest(arg.vector, arg.cookie)?;
        arg.echo = result.echo;
        arg.latency_ns = u64::try_from(result.latency.as_nanos()).unwrap_or(u64::MAX);
        arg.interrupts = result.interrupts;
        Ok(())
    }
}
