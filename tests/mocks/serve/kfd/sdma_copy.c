/* A KFD client that knows nothing of tinyhil: the kernel's uapi header, libc, and the calls ROCm's thunk makes.
 * It reads the topology, gets the interface version, allocates GTT and VRAM, maps them for the GPU and the CPU,
 * creates an SDMA queue, rings its doorbell with a COPY_LINEAR + FENCE + TRAP, waits on the signal event and
 * checks the copied bytes. Prints "key value" lines; exits 0 only when every step and the check succeed.
 * With --ring-from-thread the main thread waits with no timeout while a second thread stores the doorbell later;
 * with --poll it never waits on the event but spins on the fence value in memory, as a polling runtime does. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/kfd_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define TOPOLOGY "/sys/devices/virtual/kfd/kfd/topology/nodes"
#define COPY_BYTES (64u << 10)
#define EVENT_PAGE_BYTES (4096u * 8) /* KFD_SIGNAL_EVENT_LIMIT slots of 8 bytes */
#define RING_BYTES 4096u
#define PAGE 4096u
#define DOORBELL_FRAME_BYTES 8192u
#define VA_BASE 0x100000000ull /* the client picks GPU virtual addresses inside the GPUVM aperture */
#define SDMA_OP_COPY 1
#define SDMA_OP_FENCE 5
#define SDMA_OP_TRAP 6
#define RING_DELAY_US 200000
#define POLL_SLEEP_US 1000
#define POLL_SPINS 30000 /* 30 s of polling at most: a guard against a hang */
#define WAIT_INFINITE 0xFFFFFFFFu /* the timeout ROCm's thunk passes for "no timeout" */

#define CHECK(cond, ...)                                                                                              \
    do {                                                                                                              \
        if (!(cond)) {                                                                                                \
            fprintf(stderr, "FAILED line %d: ", __LINE__);                                                            \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));                                              \
            exit(1);                                                                                                  \
        }                                                                                                             \
    } while (0)

struct buffer {
    uint64_t va, size, handle;
    void *cpu;
};

static int kfd, render;
static uint32_t gpu_id;
static uint64_t next_va = VA_BASE;

static struct buffer alloc(uint64_t size, uint32_t domain) {
    struct buffer b = {.va = next_va, .size = size};
    next_va += size + (1u << 20);
    struct kfd_ioctl_alloc_memory_of_gpu_args args = {.va_addr = b.va, .size = size, .gpu_id = gpu_id,
                                                      .flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                                                               KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC};
    CHECK(ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &args) == 0, "ALLOC_MEMORY_OF_GPU size %#llx",
          (unsigned long long)size);
    b.handle = args.handle;
    uint32_t devices[1] = {gpu_id};
    struct kfd_ioctl_map_memory_to_gpu_args map = {.handle = b.handle, .device_ids_array_ptr = (uintptr_t)devices,
                                                   .n_devices = 1};
    CHECK(ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map) == 0 && map.n_success == 1, "MAP_MEMORY_TO_GPU");
    b.cpu = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, render, (off_t)args.mmap_offset);
    CHECK(b.cpu != MAP_FAILED, "mmap of the buffer object");
    return b;
}

static uint64_t read_property(const char *path, const char *key) {
    FILE *file = fopen(path, "r");
    CHECK(file != NULL, "fopen %s", path);
    char name[64];
    unsigned long long value;
    while (fscanf(file, "%63s %llu", name, &value) == 2)
        if (strcmp(name, key) == 0) {
            fclose(file);
            return value;
        }
    fclose(file);
    CHECK(0, "%s has no %s", path, key);
    return 0;
}

struct ring {
    volatile uint64_t *doorbell;
    uint64_t value;
};

static void *ring_later(void *arg) {
    struct ring *ring = arg;
    usleep(RING_DELAY_US);
    *ring->doorbell = ring->value;
    return NULL;
}

int main(int argc, char **argv) {
    int from_thread = argc > 1 && strcmp(argv[1], "--ring-from-thread") == 0;
    int poll = argc > 1 && strcmp(argv[1], "--poll") == 0;
    kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    CHECK(kfd >= 0, "open /dev/kfd");
    struct kfd_ioctl_get_version_args version = {0};
    CHECK(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &version) == 0, "GET_VERSION");
    printf("version %u.%u\n", version.major_version, version.minor_version);

    /* Topology: the first node with a gpu_id is the GPU to use. */
    DIR *nodes = opendir(TOPOLOGY);
    CHECK(nodes != NULL, "opendir " TOPOLOGY);
    int gpus = 0, minor = -1;
    struct dirent *entry;
    char path[512];
    while ((entry = readdir(nodes)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        snprintf(path, sizeof path, TOPOLOGY "/%s/gpu_id", entry->d_name);
        int fd = open(path, O_RDONLY);
        CHECK(fd >= 0, "open %s", path);
        char text[32] = {0};
        CHECK(read(fd, text, sizeof text - 1) > 0, "read %s", path);
        close(fd);
        uint32_t id = (uint32_t)strtoul(text, NULL, 10);
        if (!id) continue;
        gpus++;
        snprintf(path, sizeof path, TOPOLOGY "/%s/properties", entry->d_name);
        int node_minor = (int)read_property(path, "drm_render_minor");
        if (minor < 0 || node_minor < minor) gpu_id = id, minor = node_minor;
    }
    closedir(nodes);
    CHECK(gpus > 0, "no GPU node in " TOPOLOGY);
    printf("gpus %d\ngpu_id %u\n", gpus, gpu_id);

    snprintf(path, sizeof path, "/dev/dri/renderD%d", minor);
    render = open(path, O_RDWR | O_CLOEXEC);
    CHECK(render >= 0, "open %s", path);
    struct kfd_ioctl_acquire_vm_args vm = {.drm_fd = (uint32_t)render, .gpu_id = gpu_id};
    CHECK(ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm) == 0, "ACQUIRE_VM");

    struct buffer events = alloc(EVENT_PAGE_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    struct buffer src = alloc(COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    struct buffer dst = alloc(COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
    struct buffer ring = alloc(RING_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
    struct buffer pointers = alloc(PAGE, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

    struct kfd_ioctl_create_event_args event = {.event_page_offset = events.handle,
                                                .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1};
    CHECK(ioctl(kfd, AMDKFD_IOC_CREATE_EVENT, &event) == 0, "CREATE_EVENT");
    uint64_t *slots = mmap(NULL, EVENT_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, kfd,
                           (off_t)event.event_page_offset);
    CHECK(slots != MAP_FAILED, "mmap of the event page");
    CHECK(slots[event.event_slot_index] == UINT64_MAX, "event slot %u not unsignalled", event.event_slot_index);

    struct kfd_ioctl_create_queue_args queue = {
        .ring_base_address = ring.va, .ring_size = RING_BYTES, .gpu_id = gpu_id,
        .queue_type = KFD_IOC_QUEUE_TYPE_SDMA, .queue_percentage = 100, .queue_priority = 7,
        .read_pointer_address = pointers.va, .write_pointer_address = pointers.va + 8};
    CHECK(ioctl(kfd, AMDKFD_IOC_CREATE_QUEUE, &queue) == 0, "CREATE_QUEUE");
    uint64_t frame = queue.doorbell_offset & ~(uint64_t)(DOORBELL_FRAME_BYTES - 1);
    char *doorbells = mmap(NULL, DOORBELL_FRAME_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, kfd, (off_t)frame);
    CHECK(doorbells != MAP_FAILED, "mmap of the doorbell frame");
    volatile uint64_t *doorbell = (volatile uint64_t *)(doorbells + (queue.doorbell_offset - frame));
    printf("queue %u doorbell %#llx\n", queue.queue_id, (unsigned long long)queue.doorbell_offset);

    uint32_t *pattern = src.cpu;
    for (uint32_t i = 0; i < COPY_BYTES / 4; i++) pattern[i] = i * 2654435761u;
    uint64_t slot_va = events.va + event.event_slot_index * 8ull;
    uint64_t done_va = pointers.va + 16; /* a fence of the client's own: the event slot is the kernel's to reset */
    uint32_t packets[] = {
        SDMA_OP_COPY, COPY_BYTES - 1, 0, (uint32_t)src.va, (uint32_t)(src.va >> 32), (uint32_t)dst.va,
        (uint32_t)(dst.va >> 32),
        SDMA_OP_FENCE, (uint32_t)done_va, (uint32_t)(done_va >> 32), 1,
        SDMA_OP_FENCE, (uint32_t)slot_va, (uint32_t)(slot_va >> 32), 1,
        SDMA_OP_TRAP, event.event_id,
    };
    memcpy(ring.cpu, packets, sizeof packets);
    uint64_t wptr = sizeof packets; /* SDMA pointers count bytes */
    ((volatile uint64_t *)pointers.cpu)[1] = wptr;
    struct ring later = {doorbell, wptr};
    pthread_t thread;
    if (from_thread)
        CHECK(pthread_create(&thread, NULL, ring_later, &later) == 0, "pthread_create");
    else
        *doorbell = wptr; /* a plain store: the GPU notices it, no system call */

    if (poll) {
        volatile uint32_t *fence = (volatile uint32_t *)pointers.cpu + 4; /* done_va */
        for (int spins = 0; *fence != 1; spins++) { /* the GPU writes the fence with no call from this process */
            CHECK(spins < POLL_SPINS, "the fence was never written");
            usleep(POLL_SLEEP_US);
        }
    } else {
        struct kfd_event_data data = {.event_id = event.event_id};
        struct kfd_ioctl_wait_events_args wait = {.events_ptr = (uintptr_t)&data, .num_events = 1,
                                                  .wait_for_all = 1, .timeout = from_thread ? WAIT_INFINITE : 1000};
        CHECK(ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &wait) == 0, "WAIT_EVENTS");
        if (from_thread) pthread_join(thread, NULL);
        CHECK(wait.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE, "wait_result %u", wait.wait_result);
    }
    CHECK(memcmp(dst.cpu, src.cpu, COPY_BYTES) == 0, "the copied bytes differ");
    printf("rptr %llu\ncopied %u\n", (unsigned long long)((volatile uint64_t *)pointers.cpu)[0], COPY_BYTES);

    struct kfd_ioctl_destroy_queue_args destroy = {.queue_id = queue.queue_id};
    CHECK(ioctl(kfd, AMDKFD_IOC_DESTROY_QUEUE, &destroy) == 0, "DESTROY_QUEUE");
    close(render);
    close(kfd);
    return 0;
}
