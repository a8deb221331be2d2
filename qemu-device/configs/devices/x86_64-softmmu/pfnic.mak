# The devices pfnic's guests and tests use, and no others: QEMU is configured
# --without-default-devices --with-devices-x86_64=pfnic (scripts/build-qemu.sh),
# which builds about half of what the default set does. The q35 board brings
# its own chipset (ICH9 LPC and SATA, the ISA serial ports, the PIT, the RTC).

# The machine: q35 with VT-d (intel-iommu, scalable mode, our svm patch) and
# the HPET, which the default set has (a default, not a select, of the board).
CONFIG_Q35=y
CONFIG_VTD=y
CONFIG_HPET=y
# pfnic, behind a PCIe root port.
CONFIG_PCIE_PORT=y
CONFIG_PFNIC=y
# virtio-net: the side channel of a guest pair, and the wire of an rxe guest.
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_NET=y
