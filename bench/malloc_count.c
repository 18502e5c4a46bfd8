/* malloc_count.so: counts heap allocations and thread creations, for checking
 * that a hot loop does neither. Preload it and ask the counters:
 *
 *   cc -O2 -shared -fPIC -o malloc_count.so bench/malloc_count.c -ldl
 *   LD_PRELOAD=$PWD/malloc_count.so pdlab bench ...
 *
 * pdlab bench looks up pdlab_alloc_count() and pdlab_thread_count() with
 * dlsym() and, when they are there, reports how many allocations and thread
 * creations happened inside its measured decode loops. Every allocation path
 * of glibc is wrapped (malloc, calloc, realloc, the aligned ones; C++'s
 * operator new calls malloc), and forwarded to glibc's own implementation. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_long allocs;
static atomic_long threads;

long pdlab_alloc_count(void) { return atomic_load(&allocs); }
long pdlab_thread_count(void) { return atomic_load(&threads); }

void* malloc(size_t n) {
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
    void* p = memalign(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
    static create_fn real;
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    atomic_fetch_add_explicit(&threads, 1, memory_order_relaxed);
    return real(t, attr, fn, arg);
}
