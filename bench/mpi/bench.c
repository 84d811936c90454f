/* Open MPI side of scripts/bench_mpi.sh: broadcast, reduction, allreduce, barrier and
 * allgather timed as in the banyan paper. For each operation:
 *
 *   barrier; the root takes t0; the operation; every other rank sends the root an empty
 *   message (an ack); the root takes t1 once it has them all: time = t1 - t0.
 *
 * Each rank also notes when the operation returned there (CLOCK_MONOTONIC, one clock
 * for every process of a host); gathered after the run, the latest of those minus t0 is
 * the "last" time: when the last process had its result, without the acks.
 *
 * The barrier-plus-acks cost alone is timed the same way without the operation. One
 * warm-up run, then REPS timed runs; the root prints one JSON object per line:
 *   {"impl":"openmpi","op":"bcast","size":B,"procs":N,"runs_us":[...],"median_us":M,
 *    "last_runs_us":[...],"last_median_us":L,"overhead_us":O,"ok":true}
 * (op "overhead" is the barrier-plus-acks cost alone). Reductions and allreduces are
 * int32 sums whose contributions follow banyan's control protocol formula (rank r as
 * vnode r): element i = ((r*31 + i*7 + seq) % 17) - 8, checked at the root (reduce) or
 * every rank (allreduce). Allgather: SIZE bytes per rank, rank r's block the pattern of
 * operation seq + 31 r (byte i = (i*131 + seq + 31 r) & 0xff), checked at every rank.
 * A barrier's size is 0.
 *
 * usage: bench REPS BCAST_SMALL BCAST_LARGE REDUCE_BYTES [OPS [ALLREDUCE_BYTES[,...]
 *              [ALLGATHER_BYTES]]]
 *   OPS: comma-separated of bcast, reduce, allreduce, barrier, allgather (default
 *   bcast,reduce); ALLREDUCE_BYTES default 4,4194304; ALLGATHER_BYTES (per rank) 1024.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static unsigned char pattern(long i, long seq) {
  return (unsigned char)((i * 131 + seq) & 0xff);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

enum kind { k_overhead, k_bcast, k_reduce, k_allreduce, k_barrier, k_allgather };

static void* grow(void* p, long bytes) {
  free(p);
  p = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (!p) {
    fprintf(stderr, "bench: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* Returns 1 when the data checked out (at the ranks that can tell). *us: the root's
 * acked time; *last_us: the latest rank's return from the operation, after the root's
 * t0 (meaningful at the root). */
static int run_once(enum kind kind, long bytes, long seq, int rank, int size, double* us,
                    double* last_us) {
  static unsigned char* buf = NULL;
  static int32_t* in = NULL;
  static int32_t* out = NULL;
  static long cap = 0, gather_cap = 0;
  int ok = 1;
  if (bytes > cap) {
    buf = grow(buf, bytes);
    in = grow(in, bytes);
    out = grow(out, bytes);
    cap = bytes;
    gather_cap = 0;
  }
  if (kind == k_allgather && bytes * size > gather_cap) {
    /* the receive buffer, in `buf`'s place: N blocks */
    buf = grow(buf, bytes * size > cap ? bytes * size : cap);
    gather_cap = bytes * size;
  }
  long count = bytes / 4;
  if (kind == k_bcast)
    for (long i = 0; i < bytes; ++i)
      buf[i] = rank == 0 ? pattern(i, seq) : 0;
  if (kind == k_reduce || kind == k_allreduce)
    for (long i = 0; i < count; ++i)
      in[i] = element(rank, i, seq);
  if (kind == k_allgather) {
    for (long i = 0; i < bytes; ++i)
      ((unsigned char*)in)[i] = pattern(i, seq + 31L * rank);
    memset(buf, 0, (size_t)(bytes * size));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_us();
  if (kind == k_bcast)
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  else if (kind == k_reduce)
    MPI_Reduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, 0, MPI_COMM_WORLD);
  else if (kind == k_allreduce)
    MPI_Allreduce(in, out, (int)count, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
  else if (kind == k_barrier)
    MPI_Barrier(MPI_COMM_WORLD);
  else if (kind == k_allgather)
    MPI_Allgather(in, (int)bytes, MPI_BYTE, buf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  double done = now_us();
  collect_acks(rank, size);
  double t1 = now_us();
  *us = t1 - t0;
  double latest = 0;
  MPI_Reduce(&done, &latest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD); /* after the timing */
  *last_us = latest - t0;
  if (kind == k_bcast)
    for (long i = 0; i < bytes && ok; ++i)
      ok = buf[i] == pattern(i, seq);
  if ((kind == k_reduce && rank == 0) || kind == k_allreduce)
    for (long i = 0; i < count && ok; ++i) {
      uint32_t want = 0;
      for (int r = 0; r < size; ++r)
        want += (uint32_t)element(r, i, seq);
      ok = (uint32_t)out[i] == want;
    }
  if (kind == k_allgather)
    for (int r = 0; r < size && ok; ++r)
      for (long i = 0; i < bytes && ok; ++i)
        ok = buf[r * bytes + i] == pattern(i, seq + 31L * r);
  return ok;
}

static void print_runs(const char* key, const double* v, int n) {
  printf("\"%s\":[", key);
  for (int i = 0; i < n; ++i)
    printf("%s%.1f", i ? "," : "", v[i]);
  printf("]");
}

static void measure(const char* name, enum kind kind, long bytes, int reps, int rank, int size,
                    double overhead_us) {
  double runs[64], last[64];
  int ok = 1;
  double us, l;
  static long seq = 0;
  ok &= run_once(kind, bytes, ++seq, rank, size, &us, &l); /* warm-up */
  for (int i = 0; i < reps; ++i)
    ok &= run_once(kind, bytes, ++seq, rank, size, &runs[i], &last[i]);
  int all_ok = 0;
  MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
  if (rank != 0)
    return;
  printf("{\"impl\":\"openmpi\",\"op\":\"%s\",\"size\":%ld,\"procs\":%d,", name, bytes, size);
  print_runs("runs_us", runs, reps);
  printf(",");
  print_runs("last_runs_us", last, reps);
  double m = median(runs, reps);
  double lm = median(last, reps);
  printf(",\"median_us\":%.1f,\"last_median_us\":%.1f,\"overhead_us\":%.1f,\"ok\":%s}\n", m, lm,
         kind == k_overhead ? m : overhead_us, all_ok ? "true" : "false");
  fflush(stdout);
}

/* Whether `op` is one of the comma-separated `ops`. */
static int wants(const char* ops, const char* op) {
  size_t n = strlen(op);
  for (const char* p = ops; *p;) {
    const char* e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, op, n) == 0)
      return 1;
    if (!e)
      break;
    p = e + 1;
  }
  return 0;
}

/* Every comma-separated item of `ops` is a known operation. */
static int ops_known(const char* ops) {
  static const char* const known[] = {"bcast", "reduce", "allreduce", "barrier", "allgather"};
  for (const char* p = ops; *p;) {
    const char* e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int found = 0;
    for (size_t k = 0; k < sizeof known / sizeof *known; ++k)
      found |= strlen(known[k]) == len && strncmp(p, known[k], len) == 0;
    if (!found)
      return 0;
    if (!e)
      break;
    p = e + 1;
  }
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 5 || argc > 8) {
    if (rank == 0)
      fprintf(stderr, "usage: bench REPS BCAST_SMALL BCAST_LARGE REDUCE_BYTES [OPS "
                      "[ALLREDUCE_BYTES[,...] [ALLGATHER_BYTES]]]\n");
    MPI_Finalize();
    return 2;
  }
  int reps = atoi(argv[1]);
  long small = atol(argv[2]), large = atol(argv[3]), red = atol(argv[4]);
  const char* ops = argc > 5 ? argv[5] : "bcast,reduce";
  const char* allreduce_sizes = argc > 6 ? argv[6] : "4,4194304";
  long gather = argc > 7 ? atol(argv[7]) : 1024;
  long ar[16];
  int n_ar = 0;
  int bad = reps < 1 || reps > 64 || small < 0 || large < 0 || red < 4 || red % 4 || gather < 1
            || !ops_known(ops);
  for (const char* p = allreduce_sizes; *p && !bad;) {
    char* e;
    long v = strtol(p, &e, 10);
    bad = e == p || v < 4 || v % 4 || n_ar == 16 || (*e && *e != ',');
    if (!bad)
      ar[n_ar++] = v;
    p = *e ? e + 1 : e;
  }
  if (bad || n_ar == 0) {
    if (rank == 0)
      fprintf(stderr, "bench: bad arguments\n");
    MPI_Finalize();
    return 2;
  }
  /* The overhead alone, measured first and then passed along with each operation. */
  double runs[64], us, l;
  for (int i = 0; i < reps + 1; ++i) {
    run_once(k_overhead, 0, 0, rank, size, &us, &l);
    if (i)
      runs[i - 1] = us;
  }
  double overhead = median(runs, reps);
  measure("overhead", k_overhead, 0, reps, rank, size, overhead);
  if (wants(ops, "bcast")) {
    measure("bcast", k_bcast, small, reps, rank, size, overhead);
    measure("bcast", k_bcast, large, reps, rank, size, overhead);
  }
  if (wants(ops, "reduce"))
    measure("reduce", k_reduce, red, reps, rank, size, overhead);
  if (wants(ops, "allreduce"))
    for (int i = 0; i < n_ar; ++i)
      measure("allreduce", k_allreduce, ar[i], reps, rank, size, overhead);
  if (wants(ops, "barrier"))
    measure("barrier", k_barrier, 0, reps, rank, size, overhead);
  if (wants(ops, "allgather"))
    measure("allgather", k_allgather, gather, reps, rank, size, overhead);
  MPI_Finalize();
  return 0;
}
