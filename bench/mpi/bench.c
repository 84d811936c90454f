/* Open MPI side of scripts/bench_mpi.sh: broadcast and reduction timed as in the banyan
 * paper. For each operation:
 *
 *   barrier; the root takes t0; the operation; every other rank sends the root an empty
 *   message (an ack); the root takes t1 once it has them all: time = t1 - t0.
 *
 * The barrier-plus-acks cost alone is timed the same way without the operation. One
 * warm-up run, then REPS timed runs; the root prints one JSON object per line:
 *   {"impl":"openmpi","op":"bcast","size":B,"procs":N,"runs_us":[...],"median_us":M,
 *    "overhead_us":O,"ok":true}
 * (op "overhead" is the barrier-plus-acks cost alone). Reductions are int32 sums whose
 * contributions follow banyan's control protocol formula (rank r as vnode r):
 * element i = ((r*31 + i*7 + seq) % 17) - 8, checked at the root.
 *
 * usage: bench REPS BCAST_SMALL BCAST_LARGE REDUCE_BYTES
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ack_tag = 7 };

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void collect_acks(int rank, int size) {
  if (rank == 0) {
    for (int i = 1; i < size; ++i)
      MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, ack_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Send(NULL, 0, MPI_BYTE, 0, ack_tag, MPI_COMM_WORLD);
  }
}

static int32_t element(int r, long i, long seq) {
  return (int32_t)(((uint64_t)r * 31 + (uint64_t)i * 7 + (uint64_t)seq) % 17) - 8;
}

/* kind: 0 = overhead only, 1 = broadcast, 2 = int32 sum reduction. Returns 1 when the
 * data checked out (at the ranks that can tell). */
static int run_once(int kind, long bytes, long seq, int rank, int size, double* us) {
  static unsigned char* buf = NULL;
  static int32_t* in = NULL;
  static int32_t* out = NULL;
  static long cap = 0;
  int ok = 1;
  if (bytes > cap) {
    free(buf); free(in); free(out);
    buf = malloc((size_t)bytes);
    in = malloc((size_t)bytes);
    out = malloc((size_t)bytes);
    if (!buf || !in || !out) {
      fprintf(stderr, "bench: out of memory\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    cap = bytes;
  }
  long count = bytes / 4;
  if (kind == 1)
    for (long i = 0; i < bytes; ++i)
      buf[i] = rank == 0 ? (unsigned char)((i * 131 + seq) & 0xff) : 0;
  if (kind == 2)
    for (long i = 0; i < count; ++i)
      in[i] = element(rank, i, seq);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  if (kind == 1)
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  else if (kind == 2)
    MPI_Reduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, 0, MPI_COMM_WORLD);
  collect_acks(rank, size);
  double t1 = MPI_Wtime();
  *us = (t1 - t0) * 1e6;
  if (kind == 1)
    for (long i = 0; i < bytes && ok; ++i)
      ok = buf[i] == (unsigned char)((i * 131 + seq) & 0xff);
  if (kind == 2 && rank == 0)
    for (long i = 0; i < count && ok; ++i) {
      uint32_t want = 0;
      for (int r = 0; r < size; ++r)
        want += (uint32_t)element(r, i, seq);
      ok = (uint32_t)out[i] == want;
    }
  return ok;
}

static void measure(const char* name, int kind, long bytes, int reps, int rank, int size,
                    double overhead_us) {
  double runs[64];
  int ok = 1;
  double us;
  static long seq = 0;
  ok &= run_once(kind, bytes, ++seq, rank, size, &us); /* warm-up */
  for (int i = 0; i < reps; ++i)
    ok &= run_once(kind, bytes, ++seq, rank, size, &runs[i]);
  int all_ok = 0;
  MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
  if (rank != 0)
    return;
  printf("{\"impl\":\"openmpi\",\"op\":\"%s\",\"size\":%ld,\"procs\":%d,\"runs_us\":[", name,
         bytes, size);
  for (int i = 0; i < reps; ++i)
    printf("%s%.1f", i ? "," : "", runs[i]);
  double m = median(runs, reps);
  printf("],\"median_us\":%.1f,\"overhead_us\":%.1f,\"ok\":%s}\n", m,
         kind == 0 ? m : overhead_us, all_ok ? "true" : "false");
  fflush(stdout);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 5) {
    if (rank == 0)
      fprintf(stderr, "usage: bench REPS BCAST_SMALL BCAST_LARGE REDUCE_BYTES\n");
    MPI_Finalize();
    return 2;
  }
  int reps = atoi(argv[1]);
  long small = atol(argv[2]), large = atol(argv[3]), red = atol(argv[4]);
  if (reps < 1 || reps > 64 || small < 0 || large < 0 || red < 4 || red % 4) {
    if (rank == 0)
      fprintf(stderr, "bench: bad arguments\n");
    MPI_Finalize();
    return 2;
  }
  /* The overhead alone, measured first and then passed along with each operation. */
  double runs[64], us;
  for (int i = 0; i < reps + 1; ++i) {
    run_once(0, 0, 0, rank, size, &us);
    if (i)
      runs[i - 1] = us;
  }
  double overhead = median(runs, reps);
  measure("overhead", 0, 0, reps, rank, size, overhead);
  measure("bcast", 1, small, reps, rank, size, overhead);
  measure("bcast", 1, large, reps, rank, size, overhead);
  measure("reduce", 2, red, reps, rank, size, overhead);
  MPI_Finalize();
  return 0;
}
