// flood FILE THREADS SECONDS seq|random BS: THREADS threads each pread BS
// bytes of FILE as fast as they can for SECONDS, at consecutive offsets
// (seq, wrapping around) or at random block offsets; prints the calls made
// and the calls per second.
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static double seconds;
static int random_offsets;
static long block, file_size;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *reader(void *arg) {
    int fd = open(path, O_RDONLY);
    char *buf = malloc(block);
    unsigned long x = (unsigned long)arg * 2654435761u + 1;
    long off = 0, calls = 0;
    double end = now() + seconds;
    while (now() < end) {
        for (int i = 0; i < 1000; i++) {
            if (random_offsets) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                off = (long)(x % (unsigned long)(file_size / block)) * block;
            } else if ((off += block) + block > file_size) {
                off = 0;
            }
            pread(fd, buf, block, off);
        }
        calls += 1000;
    }
    close(fd);
    return (void *)calls;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: flood FILE THREADS SECONDS seq|random BS\n");
        return 2;
    }
    path = argv[1];
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    random_offsets = !strcmp(argv[4], "random");
    block = atol(argv[5]);
    int fd = open(path, O_RDONLY);
    file_size = lseek(fd, 0, SEEK_END);
    close(fd);
    if (threads < 1 || threads > 64 || block < 1 || file_size < block) {
        fprintf(stderr, "flood: bad arguments\n");
        return 2;
    }
    pthread_t t[64];
    double start = now();
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], 0, reader, (void *)i);
    long total = 0;
    for (int i = 0; i < threads; i++) {
        void *calls;
        pthread_join(t[i], &calls);
        total += (long)calls;
    }
    printf("%ld %.0f\n", total, total / (now() - start));
    return 0;
}
