// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * pfnic's rdma-core provider (libpfnic-rdmav34.so): Debian's own
 * libibverbs.so.1 loads it for the RDMA devices the pfnic driver registers
 * with the RDMA core, matched by their PCI function's IDs.
 *
 * It opens a context through the core (GET_CONTEXT, checking the driver's
 * ABI) and answers the device and port queries with the core's commands.
 * The verbs objects and the data path still go through /dev/pfnicN and
 * pfnic's own libibverbs; they move here in later steps.
 *
 * It uses only provider calls whose signature is the same in rdma-core 44
 * (Debian bookworm's libibverbs) and 56.1 (the source it is built in), both
 * private ABI 34: it is built against 56.1's headers and loaded by 44.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "pfnic.h"

/* The PCI IDs of the pfnic function (docs/registers.md). */
#define PCI_VENDOR_ID_REDHAT_QUMRANET 0x1af4
#define PCI_DEVICE_ID_PFNIC 0x10f5

_Static_assert(sizeof(struct pfnic_ib_alloc_ucontext_resp) == 24,
	       "struct pfnic_ib_alloc_ucontext_resp differs from the driver's");

struct pfnic_get_context_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct pfnic_ib_alloc_ucontext_resp drv;
};

static int pfnic_query_device(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr,
			      size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/* The driver encodes the version as major 47:32, minor 31:16, patch 15:0. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int pfnic_query_port(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static void pfnic_free_context(struct ibv_context *ibctx)
{
	struct pfnic_context *ctx = to_pfnic_ctx(ibctx);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops pfnic_context_ops = {
	.free_context = pfnic_free_context,
	.query_device_ex = pfnic_query_device,
	.query_port = pfnic_query_port,
};

static struct verbs_context *pfnic_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd, void *private_data)
{
	struct pfnic_get_context_resp resp = {};
	struct ibv_get_context cmd = {};
	struct pfnic_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp)))
		goto err;

	ctx->info = resp.drv;
	verbs_set_ops(&ctx->ibv_ctx, &pfnic_context_ops);
	return &ctx->ibv_ctx;

err:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *pfnic_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct pfnic_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->ibv_dev;
}

static void pfnic_device_free(struct verbs_device *verbs_dev)
{
	free(container_of(verbs_dev, struct pfnic_device, ibv_dev));
}

static const struct verbs_match_ent pfnic_match_table[] = {
	VERBS_PCI_MATCH(PCI_VENDOR_ID_REDHAT_QUMRANET, PCI_DEVICE_ID_PFNIC, NULL),
	{},
};

static const struct verbs_device_ops pfnic_dev_ops = {
	.name = "pfnic",
	.match_min_abi_version = PFNIC_IB_ABI_VERSION,
	.match_max_abi_version = PFNIC_IB_ABI_VERSION,
	.match_table = pfnic_match_table,
	.alloc_device = pfnic_device_alloc,
	.uninit_device = pfnic_device_free,
	.alloc_context = pfnic_alloc_context,
};

PROVIDER_DRIVER(pfnic, pfnic_dev_ops);
