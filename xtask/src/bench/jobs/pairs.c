// pairs FILE CHUNKS PAIRS: reads FILE in 4 KiB calls (wrapping around at its
// end) and writes each block to /dev/null, as `dd bs=4k of=/dev/null` does;
// prints the thread CPU time per read+write pair, the least and the median
// over CHUNKS chunks of PAIRS pairs. Thread CPU time counts what the calls
// cost this thread (the probes run in it) and not time it spent preempted.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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
        fprintf(stderr, "usage: pairs FILE CHUNKS PAIRS\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY), null = open("/dev/null", O_WRONLY);
    int chunks = atoi(argv[2]);
    long pairs = atol(argv[3]);
    if (fd < 0 || null < 0 || chunks < 1 || pairs < 1) {
        perror("pairs");
        return 2;
    }
    char buf[4096];
    double *per_pair = malloc(sizeof(double) * chunks);
    for (int k = 0; k < chunks; k++) {
        double start = cpu_ns();
        for (long i = 0; i < pairs; i++) {
            ssize_t got = read(fd, buf, sizeof buf);
            if (got <= 0) {
                lseek(fd, 0, SEEK_SET);
                got = read(fd, buf, sizeof buf);
            }
            write(null, buf, got);
        }
        per_pair[k] = (cpu_ns() - start) / pairs;
    }
    qsort(per_pair, chunks, sizeof(double), by_value);
    printf("%.1f %.1f\n", per_pair[0], per_pair[chunks / 2]);
    return 0;
}
