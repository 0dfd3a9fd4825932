// stats FILE CHUNKS CALLS: stat()s FILE, then a name beside it that does not
// exist, CALLS times each per chunk, as a loader walking or probing a
// dataset does; prints the thread CPU time per call, the least and the
// median over CHUNKS chunks. Thread CPU time counts what the probes cost
// this thread (they run in it), not time it spent preempted.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: stats FILE CHUNKS CALLS\n");
        return 2;
    }
    int chunks = atoi(argv[2]);
    long calls = atol(argv[3]);
    char missing[4096];
    snprintf(missing, sizeof missing, "%s.missing", argv[1]);
    struct stat st;
    if (chunks < 1 || calls < 1 || stat(argv[1], &st) != 0) {
        perror("stats");
        return 2;
    }
    double *per_call = malloc(sizeof(double) * chunks);
    for (int k = 0; k < chunks; k++) {
        double start = cpu_ns();
        for (long i = 0; i < calls; i++) {
            stat(argv[1], &st);
            stat(missing, &st);
        }
        per_call[k] = (cpu_ns() - start) / (2.0 * calls);
    }
    qsort(per_call, chunks, sizeof(double), by_value);
    printf("%.1f %.1f\n", per_call[0], per_call[chunks / 2]);
    return 0;
}
