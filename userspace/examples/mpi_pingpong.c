// SPDX-License-Identifier: GPL-2.0
/*
 * pfnic-mpi-pingpong: MPI ping-pong between ranks 0 and 1, every byte of
 * every message checked.
 *
 * Rank 0 sends a message of each size to rank 1, which sends it back; the
 * half round trip is the latency, size over it the bandwidth. Each message
 * carries a pattern made of its size, its iteration and the rank that wrote
 * it (0), so a message placed at the wrong offset, a stale one or one cut
 * short fails the check; rank 1 checks what arrived, rank 0 the echo, and
 * any mismatch aborts the job (exit status nonzero) with where it was.
 *
 * Output (rank 0): a line per size, "size <bytes> iters <n> lat_us <f>
 * bw_MBps <f>", then "mpi-pingpong: ok, <n> messages checked over <fabric>".
 * usage: pfnic-mpi-pingpong [--max-size BYTES] [--fabric NAME]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Under TCG a round trip costs hundreds of microseconds: few iterations of
 * the large sizes.
 */
static int iterations(size_t size)
{
	if (size <= 4096)
		return 100;
	if (size <= 65536)
		return 40;
	return 10;
}

static uint8_t pattern(size_t size, int iter, int rank, size_t i)
{
	return (uint8_t)(size * 7 + (size_t)iter * 31 + (size_t)rank * 101 + i * 13 + (i >> 8));
}

static void fill(uint8_t *buf, size_t size, int iter, int rank)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = pattern(size, iter, rank, i);
}

static long checked;

static void check(const uint8_t *buf, size_t size, int iter, int from, int me)
{
	for (size_t i = 0; i < size; i++) {
		if (buf[i] != pattern(size, iter, from, i)) {
			fprintf(stderr,
				"mpi-pingpong: rank %d: message %d of %zu bytes from rank %d: byte %zu is %#x, want %#x\n",
				me, iter, size, from, i, buf[i], pattern(size, iter, from, i));
			MPI_Abort(MPI_COMM_WORLD, 3);
		}
	}
	checked++;
}

int main(int argc, char **argv)
{
	size_t max_size = 1 << 20;
	const char *fabric = "?";
	int rank, ranks;

	MPI_Init(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--max-size") && i + 1 < argc) {
			max_size = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--fabric") && i + 1 < argc) {
			fabric = argv[++i];
		} else {
			fprintf(stderr, "usage: %s [--max-size BYTES] [--fabric NAME]\n", argv[0]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	if (ranks != 2) {
		if (!rank)
			fprintf(stderr, "mpi-pingpong: needs 2 ranks, has %d\n", ranks);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	char host[MPI_MAX_PROCESSOR_NAME];
	int len;

	MPI_Get_processor_name(host, &len);
	printf("mpi-pingpong: rank %d of %d on %s\n", rank, ranks, host);
	fflush(stdout);

	uint8_t *out = malloc(max_size), *in = malloc(max_size);

	if (!out || !in) {
		fprintf(stderr, "mpi-pingpong: no memory for %zu bytes\n", max_size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int peer = !rank;

	for (size_t size = 1; size <= max_size; size *= 8) {
		int iters = iterations(size);
		double busy = 0;
		/*
		 * Rank 1 echoes each message and checks it after its reply is on
		 * its way; rank 0 checks the echo against what it sent. Only rank
		 * 0's send and receive are timed, not the filling and checking.
		 * Iteration -1 warms the path up (connections, registrations).
		 */
		for (int it = -1; it < iters; it++) {
			int tag = (it + 1) & 0x7fff;

			if (rank == 0) {
				fill(out, size, it, rank);
				memset(in, 0, size);
				double t0 = MPI_Wtime();

				MPI_Send(out, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
				MPI_Recv(in, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				if (it >= 0)
					busy += MPI_Wtime() - t0;
				check(in, size, it, rank, rank);
			} else {
				memset(in, 0, size);
				MPI_Recv(in, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				MPI_Send(in, (int)size, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
				check(in, size, it, peer, rank);
			}
		}
		double half_rtt = busy / iters / 2;

		if (rank == 0) {
			printf("size %zu iters %d lat_us %.2f bw_MBps %.4f\n", size, iters,
			       half_rtt * 1e6, (double)size / half_rtt / 1e6);
			fflush(stdout);
		}
		if (size == max_size)
			break;
		if (size * 8 > max_size)
			size = max_size / 8;
	}
	/* Both ranks' checks, summed where the report is. */
	long total = 0;

	MPI_Reduce(&checked, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi-pingpong: ok, %ld messages checked over %s\n", total, fabric);
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}
