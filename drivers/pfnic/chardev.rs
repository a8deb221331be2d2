// SPDX-License-Identifier: GPL-2.0

//! The character device `/dev/pfnicN` and its ioctls.

use crate::{context::Context, nic::Nic, uapi, verbs::file::VerbsFile};
use kernel::{
    fs::File,
    ioctl::{_IOR, _IOW, _IOWR},
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::VmaNew,
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
const _: () =
    assert!(uapi::PFNIC_IOCTL_ALLOC_PD == _IOR::<uapi::PdHandle>(uapi::PFNIC_IOCTL_MAGIC, 0x07));
const _: () =
    assert!(uapi::PFNIC_IOCTL_DEALLOC_PD == _IOW::<uapi::PdHandle>(uapi::PFNIC_IOCTL_MAGIC, 0x08));
const _: () =
    assert!(uapi::PFNIC_IOCTL_REG_MR == _IOWR::<uapi::RegMr>(uapi::PFNIC_IOCTL_MAGIC, 0x09));
const _: () =
    assert!(uapi::PFNIC_IOCTL_DEREG_MR == _IOW::<uapi::MrHandle>(uapi::PFNIC_IOCTL_MAGIC, 0x0a));
const _: () =
    assert!(uapi::PFNIC_IOCTL_ADVISE_MR == _IOW::<uapi::AdviseMr>(uapi::PFNIC_IOCTL_MAGIC, 0x0b));
const _: () =
    assert!(uapi::PFNIC_IOCTL_QUERY_MR == _IOWR::<uapi::QueryMr>(uapi::PFNIC_IOCTL_MAGIC, 0x0c));
const _: () =
    assert!(uapi::PFNIC_IOCTL_CREATE_CQ == _IOWR::<uapi::CreateCq>(uapi::PFNIC_IOCTL_MAGIC, 0x0d));
const _: () = assert!(
    uapi::PFNIC_IOCTL_DESTROY_CQ == _IOWR::<uapi::ObjectNumber>(uapi::PFNIC_IOCTL_MAGIC, 0x0e)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_CREATE_QP == _IOWR::<uapi::CreateQp>(uapi::PFNIC_IOCTL_MAGIC, 0x0f));
const _: () =
    assert!(uapi::PFNIC_IOCTL_MODIFY_QP == _IOW::<uapi::ModifyQp>(uapi::PFNIC_IOCTL_MAGIC, 0x10));
const _: () =
    assert!(uapi::PFNIC_IOCTL_QUERY_QP == _IOWR::<uapi::QueryQp>(uapi::PFNIC_IOCTL_MAGIC, 0x11));
const _: () = assert!(
    uapi::PFNIC_IOCTL_DESTROY_QP == _IOWR::<uapi::ObjectNumber>(uapi::PFNIC_IOCTL_MAGIC, 0x12)
);
const _: () = assert!(
    uapi::PFNIC_IOCTL_SET_PORT_IPV4 == _IOW::<uapi::PortIpv4>(uapi::PFNIC_IOCTL_MAGIC, 0x13)
);
const _: () = assert!(
    uapi::PFNIC_IOCTL_CREATE_COMP_CHANNEL
        == _IOR::<uapi::CompChannel>(uapi::PFNIC_IOCTL_MAGIC, 0x14)
);

const _: () =
    assert!(uapi::PFNIC_IOCTL_SET_MEM_MODE == _IOW::<uapi::MemMode>(uapi::PFNIC_IOCTL_MAGIC, 0x15));
const _: () =
    assert!(uapi::PFNIC_IOCTL_GET_ASYNC_FD == _IOR::<uapi::AsyncFd>(uapi::PFNIC_IOCTL_MAGIC, 0x16));
const _: () = assert!(
    uapi::PFNIC_IOCTL_CREATE_SRQ == _IOWR::<uapi::CreateSrq>(uapi::PFNIC_IOCTL_MAGIC, 0x17)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_MODIFY_SRQ == _IOW::<uapi::ModifySrq>(uapi::PFNIC_IOCTL_MAGIC, 0x18));
const _: () =
    assert!(uapi::PFNIC_IOCTL_QUERY_SRQ == _IOWR::<uapi::QuerySrq>(uapi::PFNIC_IOCTL_MAGIC, 0x19));
const _: () = assert!(
    uapi::PFNIC_IOCTL_DESTROY_SRQ == _IOWR::<uapi::ObjectNumber>(uapi::PFNIC_IOCTL_MAGIC, 0x1a)
);
const _: () =
    assert!(uapi::PFNIC_IOCTL_ALLOC_DM == _IOWR::<uapi::AllocDm>(uapi::PFNIC_IOCTL_MAGIC, 0x1b));
const _: () =
    assert!(uapi::PFNIC_IOCTL_FREE_DM == _IOW::<uapi::DmHandle>(uapi::PFNIC_IOCTL_MAGIC, 0x1c));
const _: () =
    assert!(uapi::PFNIC_IOCTL_REG_DM_MR == _IOWR::<uapi::RegDmMr>(uapi::PFNIC_IOCTL_MAGIC, 0x1d));

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

/// An open `/dev/pfnicN`: the opener's hardware context and its verbs objects. Fields drop in
/// order: the verbs objects are destroyed in the device before the context stops and its
/// PASID is unbound.
pub(crate) struct PfnicFile {
    nic: Arc<Nic>,
    verbs: VerbsFile,
    ctx: Context,
}

#[vtable]
impl MiscDevice for PfnicFile {
    type Ptr = KBox<Self>;
    type RegistrationData = Arc<Nic>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        let nic = misc.data();
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let ctx = Context::new(nic, mm, || Some(file.mappings()))?;
        let verbs = VerbsFile::new(nic, ctx.index(), ctx.has_pasid(), true)?;
        nic.attach_objects(ctx.index(), verbs.objects.clone())?;
        Ok(KBox::new(
            PfnicFile {
                nic: nic.clone(),
                verbs,
                ctx,
            },
            GFP_KERNEL,
        )?)
    }

    /// Offset 0: the context's doorbell page; other offsets: the rings of a CQ or QP, at the
    /// offset its create ioctl returned. Shared mappings only, by the owner's address space.
    fn mmap(me: &PfnicFile, _file: &File, vma: &VmaNew) -> Result {
        if !me.ctx.owned_by(Some(vma.mm())) {
            return Err(EPERM);
        }
        me.verbs.mmap(vma)
    }

    fn ioctl(me: &PfnicFile, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let arg = UserPtr::from_addr(arg);
        match cmd {
            uapi::PFNIC_IOCTL_QUERY_DEVICE => output(arg, || me.query_device()),
            uapi::PFNIC_IOCTL_QUERY_STATS => output(arg, || me.nic.stats()),
            uapi::PFNIC_IOCTL_SUBMIT => in_out(arg, |op| me.submit(op)),
            uapi::PFNIC_IOCTL_QUERY_CONTEXT => output(arg, || me.query_context()),
            uapi::PFNIC_IOCTL_SELFTEST => in_out(arg, |a| me.selftest(a)),
            _ => me.verbs_ioctl(cmd, arg),
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
        q.mem_mode = self.verbs.mem_mode();
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

    /// The verbs ioctls. Device queries are for anyone who can open the device, the port's
    /// address for `CAP_NET_ADMIN`; objects are for the address space that owns the context.
    fn verbs_ioctl(&self, cmd: u32, arg: UserPtr) -> Result {
        let v = &self.verbs;
        match cmd {
            uapi::PFNIC_IOCTL_QUERY_VERBS => return output(arg, || v.query_verbs()),
            uapi::PFNIC_IOCTL_QUERY_PORT => return output(arg, || self.nic.query_port()),
            // The port's address is the device's, not the context's: whoever may administer
            // the network sets it (`CAP_NET_ADMIN`).
            uapi::PFNIC_IOCTL_SET_PORT_IPV4 => return input(arg, |a| self.nic.set_port_ipv4(a)),
            _ => {}
        }
        let owned = || {
            self.nic.verbs()?;
            // Every ioctl fails once the device is unbound, including those that would not
            // reach it.
            self.nic.with_bar(|_| ())?;
            self.owner_only()
        };
        match cmd {
            uapi::PFNIC_IOCTL_SET_MEM_MODE => input(arg, |a| {
                owned()?;
                v.set_mem_mode(a)
            }),
            uapi::PFNIC_IOCTL_ALLOC_PD => output(arg, || {
                owned()?;
                v.alloc_pd()
            }),
            uapi::PFNIC_IOCTL_DEALLOC_PD => input(arg, |a| {
                owned()?;
                v.dealloc_pd(a)
            }),
            uapi::PFNIC_IOCTL_REG_MR => in_out(arg, |a| {
                owned()?;
                v.reg_mr(a)
            }),
            uapi::PFNIC_IOCTL_DEREG_MR => input(arg, |a| {
                owned()?;
                v.dereg_mr(a)
            }),
            uapi::PFNIC_IOCTL_ADVISE_MR => input(arg, |a| {
                owned()?;
                v.advise_mr(a)
            }),
            uapi::PFNIC_IOCTL_QUERY_MR => in_out(arg, |a| {
                owned()?;
                v.query_mr(a)
            }),
            uapi::PFNIC_IOCTL_CREATE_CQ => in_out(arg, |a| {
                owned()?;
                v.create_cq(a)
            }),
            uapi::PFNIC_IOCTL_DESTROY_CQ => in_out(arg, |a| {
                owned()?;
                v.destroy_cq(a)
            }),
            uapi::PFNIC_IOCTL_CREATE_QP => in_out(arg, |a| {
                owned()?;
                v.create_qp(a)
            }),
            uapi::PFNIC_IOCTL_MODIFY_QP => input(arg, |a| {
                owned()?;
                v.modify_qp(a)
            }),
            uapi::PFNIC_IOCTL_QUERY_QP => in_out(arg, |a| {
                owned()?;
                v.query_qp(a)
            }),
            uapi::PFNIC_IOCTL_DESTROY_QP => in_out(arg, |a| {
                owned()?;
                v.destroy_qp(a)
            }),
            uapi::PFNIC_IOCTL_CREATE_SRQ => in_out(arg, |a| {
                owned()?;
                v.create_srq(a)
            }),
            uapi::PFNIC_IOCTL_MODIFY_SRQ => input(arg, |a| {
                owned()?;
                v.modify_srq(a)
            }),
            uapi::PFNIC_IOCTL_QUERY_SRQ => in_out(arg, |a| {
                owned()?;
                v.query_srq(a)
            }),
            uapi::PFNIC_IOCTL_DESTROY_SRQ => in_out(arg, |a| {
                owned()?;
                v.destroy_srq(a)
            }),
            uapi::PFNIC_IOCTL_ALLOC_DM => in_out(arg, |a| {
                owned()?;
                v.alloc_dm(a)
            }),
            uapi::PFNIC_IOCTL_FREE_DM => input(arg, |a| {
                owned()?;
                v.free_dm(a)
            }),
            uapi::PFNIC_IOCTL_REG_DM_MR => in_out(arg, |a| {
                owned()?;
                v.reg_dm_mr(a)
            }),
            uapi::PFNIC_IOCTL_GET_ASYNC_FD => {
                owned()?;
                v.get_async_fd(|a| write_arg(user_slice::<uapi::AsyncFd>(arg).writer(), a))
            }
            uapi::PFNIC_IOCTL_CREATE_COMP_CHANNEL => {
                owned()?;
                v.create_comp_channel(|a| {
                    write_arg(user_slice::<uapi::CompChannel>(arg).writer(), a)
                })
            }
            _ => Err(ENOTTY),
        }
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
