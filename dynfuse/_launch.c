/* Calling a compiled CPU kernel on arrays: the last step of every materialization.

   A kernel's entry (codegen/llvm.py) takes a block of 8-byte cells: the data pointer of each input
   and output, the element strides of each strided input and output, then each scalar parameter in its loop
   dtype, in the low bytes of its cell. ``backends.cpu._Launcher`` packs them with ``struct`` and
   calls through ctypes, about 3 us: a quarter of a small cached trace's time. ``KernelCall.run``
   does the same in C, on one thread or split into ranges that pool threads take (``run_ranges``'s
   pool), each caller with its own scratch. It declines (returns False, having run nothing)
   whatever it would not pack exactly as the Python packing does, and the Python packing then runs;
   tests hold the two to the same results (tests/test_cpu_backend.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* What dynfuse.accelerate checks, so a stale build is never used with newer Python code. */
#define INTERFACE_VERSION 4
#define STACK_CELLS 64

typedef void (*entry_function)(void *cells, void *scratch, int64_t start, int64_t stop);

typedef struct {
    PyObject_HEAD
    entry_function entry;
    Py_ssize_t inputs, outputs, ndim, param_cell, cell_count;
    int64_t rows;
    Py_ssize_t strided_count;
    Py_ssize_t *strided; /* the operands (inputs, then outputs after them) whose element strides follow the pointers */
    Py_ssize_t param_count;
    char *param_codes;   /* struct's format character of each parameter, one cell each */
    Py_ssize_t scratch_bytes, scratch_alignment; /* each taker's scratch, and where it starts */
    int64_t *bounds;     /* range i is rows [bounds[i], bounds[i + 1]) */
    Py_ssize_t ranges;
    int takers;          /* the calling thread and takers - 1 pool threads */
} KernelCall;

#ifndef _WIN32
static void run_split(entry_function call, void *cells, void *const *scratch, int takers, const int64_t *bounds,
                      int64_t ranges);
#endif

static const char PARAM_CODES[] = "?bhiqBHIQfd";

static void kernel_call_dealloc(KernelCall *self)
{
    PyMem_Free(self->strided);
    PyMem_Free(self->param_codes);
    PyMem_Free(self->bounds);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int kernel_call_init(KernelCall *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"entry",      "inputs",        "outputs",           "strided", "ndim",
                               "param_codes", "param_cell",   "cell_count",        "rows",    "scratch_bytes",
                               "scratch_alignment", "bounds", "takers", NULL};
    unsigned long long entry;
    PyObject *strided, *bounds = NULL;
    const char *codes;
    Py_ssize_t codes_length;
    long long rows;
    int takers = 1;
    self->scratch_bytes = 0;
    self->scratch_alignment = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KnnO!ns#nnL|nnO!i", keywords, &entry, &self->inputs,
                                     &self->outputs, &PyTuple_Type, &strided, &self->ndim, &codes,
                                     &codes_length, &self->param_cell, &self->cell_count, &rows,
                                     &self->scratch_bytes, &self->scratch_alignment, &PyTuple_Type, &bounds,
                                     &takers))
        return -1;
    self->entry = (entry_function)(uintptr_t)entry;
    self->rows = rows;
    if (self->scratch_bytes < 0 || self->scratch_alignment < 1) {
        PyErr_SetString(PyExc_ValueError, "scratch_bytes must be >= 0 and scratch_alignment >= 1");
        return -1;
    }
    /* The ranges each launch is split into, given as their starts and the end (rows; one range of
       every row where not given), taken in turn by the calling thread and takers - 1 pool threads */
    if (takers < 1 || takers > 257) {
        PyErr_SetString(PyExc_ValueError, "takers must be 1 to 257: the caller and up to 256 pool threads");
        return -1;
    }
    Py_ssize_t ranges = bounds == NULL ? 1 : PyTuple_GET_SIZE(bounds) - 1;
    if (ranges < 1 || ranges > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold at least one range's start and the rows");
        return -1;
    }
    PyMem_Free(self->bounds);
    if ((self->bounds = PyMem_Calloc(ranges + 1, sizeof(int64_t))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->bounds[ranges] = rows;
    for (Py_ssize_t i = 0; bounds != NULL && i <= ranges; i++) {
        self->bounds[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(bounds, i));
        if (self->bounds[i] == -1 && PyErr_Occurred())
            return -1;
        if ((i > 0 && self->bounds[i] < self->bounds[i - 1]) || (i == 0 && self->bounds[0] != 0)
            || (i == ranges && self->bounds[i] != rows)) {
            PyErr_SetString(PyExc_ValueError, "bounds must rise from 0 to the rows");
            return -1;
        }
    }
    self->ranges = ranges;
    self->takers = takers;
    Py_ssize_t count = PyTuple_GET_SIZE(strided);
    PyMem_Free(self->strided);
    self->strided = PyMem_Calloc(count ? count : 1, sizeof(Py_ssize_t));
    PyMem_Free(self->param_codes);
    self->param_codes = PyMem_Calloc(codes_length + 1, 1);
    if (self->strided == NULL || self->param_codes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        self->strided[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(strided, k));
        if (self->strided[k] == -1 && PyErr_Occurred())
            return -1;
        if (self->strided[k] < 0 || self->strided[k] >= self->inputs + self->outputs) {
            PyErr_Format(PyExc_ValueError, "strided operand %zd is not an input or output", self->strided[k]);
            return -1;
        }
    }
    self->strided_count = count;
    for (Py_ssize_t i = 0; i < codes_length; i++) {
        if (codes[i] == '\0' || strchr(PARAM_CODES, codes[i]) == NULL) {
            PyErr_Format(PyExc_ValueError, "parameter code %c is not one of %s", codes[i], PARAM_CODES);
            return -1;
        }
    }
    memcpy(self->param_codes, codes, codes_length);
    self->param_count = codes_length;
    Py_ssize_t pointers = self->inputs + self->outputs;
    if (self->inputs < 0 || self->outputs < 0 || self->ndim < 0 ||
        self->param_cell != pointers + count * self->ndim ||
        self->cell_count < self->param_cell + codes_length) {
        PyErr_SetString(PyExc_ValueError, "the cell layout does not add up");
        return -1;
    }
    return 0;
}

/* Write one parameter as ``struct`` packs it with ``code``; 0 where struct would fail (the Python
   packing then converts it as NumPy does) or the value is not one it takes as it is. */
static int pack_param(char code, PyObject *value, int64_t *cell)
{
    if (code == 'f' || code == 'd') {
        double number = PyFloat_AsDouble(value);
        if (number == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (code == 'd') {
            memcpy(cell, &number, sizeof number);
            return 1;
        }
        float single = (float)number;
        if (isinf(single) && !isinf(number)) /* struct: OverflowError */
            return 0;
        memcpy(cell, &single, sizeof single);
        return 1;
    }
    if (code == '?') {
        int truth = PyObject_IsTrue(value);
        if (truth < 0) {
            PyErr_Clear();
            return 0;
        }
        *(unsigned char *)cell = (unsigned char)truth;
        return 1;
    }
    if (!PyLong_Check(value)) /* struct takes only integers (and their __index__) here */
        return 0;
    int overflow;
    long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (number == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    switch (code) {
    case 'b': if (overflow || number < INT8_MIN || number > INT8_MAX) return 0;
        *(int8_t *)cell = (int8_t)number; return 1;
    case 'h': if (overflow || number < INT16_MIN || number > INT16_MAX) return 0;
        *(int16_t *)cell = (int16_t)number; return 1;
    case 'i': if (overflow || number < INT32_MIN || number > INT32_MAX) return 0;
        *(int32_t *)cell = (int32_t)number; return 1;
    case 'q': if (overflow) return 0;
        *cell = number; return 1;
    case 'B': if (overflow || number < 0 || number > UINT8_MAX) return 0;
        *(uint8_t *)cell = (uint8_t)number; return 1;
    case 'H': if (overflow || number < 0 || number > UINT16_MAX) return 0;
        *(uint16_t *)cell = (uint16_t)number; return 1;
    case 'I': if (overflow || number < 0 || number > UINT32_MAX) return 0;
        *(uint32_t *)cell = (uint32_t)number; return 1;
    case 'Q': {
        if (overflow < 0 || (!overflow && number < 0))
            return 0;
        unsigned long long unsigned_number = PyLong_AsUnsignedLongLong(value);
        if (unsigned_number == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        memcpy(cell, &unsigned_number, sizeof unsigned_number);
        return 1;
    }
    }
    return 0;
}

/* The items of a list or tuple argument, which must hold ``count`` of them; -1 if it does not. */
static int items_of(PyObject *sequence, Py_ssize_t count, const char *what, PyObject ***items)
{
    if (!PyList_Check(sequence) && !PyTuple_Check(sequence)) {
        PyErr_Format(PyExc_TypeError, "KernelCall.run: %s must be a list or tuple", what);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(sequence) != count) {
        PyErr_Format(PyExc_TypeError, "KernelCall.run: %zd %s for a kernel of %zd",
                     PySequence_Fast_GET_SIZE(sequence), what, count);
        return -1;
    }
    *items = PySequence_Fast_ITEMS(sequence); /* NULL for an empty list, and never read then */
    return 0;
}

/* Fill the cells; 0 to decline. Reads only: no reference is taken or dropped. */
static int fill_cells(KernelCall *self, PyObject **inputs, PyObject **params, PyObject **outputs, int64_t *cells)
{
    for (Py_ssize_t i = 0; i < self->inputs + self->outputs; i++) {
        PyObject *array = i < self->inputs ? inputs[i] : outputs[i - self->inputs];
        if (!PyArray_Check(array))
            return 0;
        cells[i] = (int64_t)(intptr_t)PyArray_DATA((PyArrayObject *)array);
    }
    int64_t *strides = cells + self->inputs + self->outputs;
    for (Py_ssize_t k = 0; k < self->strided_count; k++) {
        Py_ssize_t number = self->strided[k];
        PyArrayObject *array =
            (PyArrayObject *)(number < self->inputs ? inputs[number] : outputs[number - self->inputs]);
        npy_intp itemsize = PyArray_ITEMSIZE(array);
        if (PyArray_NDIM(array) != self->ndim)
            return 0;
        for (Py_ssize_t axis = 0; axis < self->ndim; axis++) {
            npy_intp stride = PyArray_STRIDES(array)[axis];
            if (stride % itemsize) /* the Python packing raises the error */
                return 0;
            *strides++ = stride / itemsize;
        }
    }
    for (Py_ssize_t i = 0; i < self->param_count; i++)
        if (!pack_param(self->param_codes[i], params[i], cells + self->param_cell + i))
            return 0;
    return 1;
}

static PyObject *kernel_call_run(KernelCall *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "KernelCall.run(inputs, params, outputs)");
        return NULL;
    }
    PyObject **inputs, **params, **outputs;
    if (items_of(args[0], self->inputs, "inputs", &inputs) < 0 ||
        items_of(args[1], self->param_count, "params", &params) < 0 ||
        items_of(args[2], self->outputs, "outputs", &outputs) < 0)
        return NULL;
#ifdef _WIN32
    if (self->takers > 1) /* no pool threads here: the Python launch splits it */
        Py_RETURN_FALSE;
#endif
    int64_t stack_cells[STACK_CELLS];
    int64_t *cells = stack_cells;
    if (self->cell_count > STACK_CELLS) {
        cells = PyMem_Calloc(self->cell_count, sizeof(int64_t));
        if (cells == NULL)
            return PyErr_NoMemory();
    } else {
        memset(cells, 0, self->cell_count * sizeof(int64_t));
    }
    /* Each taker's scratch, its own (a kernel in column mode keeps a chunk's lanes there) */
    void *scratch[257] = {NULL};
    char *memory = NULL;
    if (self->scratch_bytes) {
        size_t each = (size_t)self->scratch_bytes, alignment = (size_t)self->scratch_alignment;
        memory = PyMem_RawMalloc(each * self->takers + alignment);
        if (memory == NULL) {
            if (cells != stack_cells)
                PyMem_Free(cells);
            return PyErr_NoMemory();
        }
        uintptr_t start = (uintptr_t)memory;
        start += (alignment - start % alignment) % alignment;
        for (int taker = 0; taker < self->takers; taker++)
            scratch[taker] = (void *)(start + each * taker);
    }
    int filled = fill_cells(self, inputs, params, outputs, cells);
    if (filled) {
        Py_BEGIN_ALLOW_THREADS
#ifndef _WIN32
        if (self->ranges > 1)
            run_split(self->entry, cells, scratch, self->takers, self->bounds, self->ranges);
        else
#endif
            self->entry(cells, scratch[0], 0, self->rows);
        Py_END_ALLOW_THREADS
    }
    PyMem_RawFree(memory);
    if (cells != stack_cells)
        PyMem_Free(cells);
    return PyBool_FromLong(filled);
}

static PyMethodDef kernel_call_methods[] = {
    {"run", (PyCFunction)(void (*)(void))kernel_call_run, METH_FASTCALL,
     "run(inputs, params, outputs) -> bool: run the kernel over all its rows, on this thread or in its "
     "ranges on pool threads too; False, having run nothing, where the Python packing must do it"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KernelCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynfuse._launch.KernelCall",
    .tp_doc = "A compiled kernel's entry and cell layout, called on arrays without ctypes.",
    .tp_basicsize = sizeof(KernelCall),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)kernel_call_init,
    .tp_dealloc = (destructor)kernel_call_dealloc,
    .tp_methods = kernel_call_methods,
};

/* leased_array(lease, address, shape, dtype): a C-contiguous, writeable ndarray of ``shape`` and
   ``dtype`` over the memory at ``address``, whose base is ``lease`` (host_pool's: the block stays
   handed out while the array or a view of it lives), as NumPy makes it from the lease's
   ``__array_interface__`` but without reading that dict: a pooled output costs what malloc does. */
static PyObject *leased_array(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    npy_intp dims[NPY_MAXDIMS];
    if (nargs != 4 || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) > NPY_MAXDIMS || !PyArray_DescrCheck(args[3])) {
        PyErr_SetString(PyExc_TypeError, "leased_array(lease, address, shape, dtype)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[1]);
    if (address == NULL && PyErr_Occurred())
        return NULL;
    int ndim = (int)PyTuple_GET_SIZE(args[2]);
    for (int axis = 0; axis < ndim; axis++) {
        dims[axis] = PyLong_AsSsize_t(PyTuple_GET_ITEM(args[2], axis));
        if (dims[axis] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "leased_array: negative dimensions");
            return NULL;
        }
    }
    PyArray_Descr *dtype = (PyArray_Descr *)args[3];
    Py_INCREF(dtype); /* PyArray_NewFromDescr steals it */
    PyObject *array = PyArray_NewFromDescr(&PyArray_Type, dtype, ndim, dims, NULL, address, NPY_ARRAY_CARRAY, NULL);
    if (array == NULL)
        return NULL;
    if (PyArray_SetBaseObject((PyArrayObject *)array, Py_NewRef(args[0])) < 0) { /* steals the lease */
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

/* ---- threads that share a launch --------------------------------------------------------------
   ``run_ranges``: a split launch's ranges (backends.cpu) taken in turn by the calling thread and the
   pool's threads, each with a scratch of its own, until none is left. Between launches a pool thread
   spins for ``SPIN_NANOSECONDS`` before it sleeps, as OpenMP's threads do: waking a sleeping thread
   takes tens of microseconds (milliseconds on a busy virtual machine), and in a loop the next launch
   comes within microseconds of the last. Nothing here calls Python: the threads live as long as the
   process, and a forked child starts its own. */

#ifndef _WIN32
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#define MAX_POOL_THREADS 256
#define SPIN_NANOSECONDS 200000

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int started;                 /* pool threads started, numbered 1 to started */
    atomic_ulong generation;     /* bumped by each launch, once its fields are set */
    atomic_int busy;             /* a launch has the pool: another thread's runs its ranges itself */
    atomic_int sleepers;         /* pool threads waiting on ``wake`` */
    atomic_int open;             /* 1 while the launch takes ranges: a thread may join it */
    atomic_int active;           /* threads in the launch (or checking whether they may join) */
    atomic_llong next;           /* the next range to take */
    /* the launch: set while no other thread is active */
    entry_function entry;
    void *cells;
    void *const *scratch;        /* one per taker, by its number */
    const int64_t *bounds;       /* range i is [bounds[i], bounds[i + 1]) */
    int64_t ranges;
    int takers;                  /* the calling thread (0) and pool threads 1 .. takers - 1 */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static uint64_t now_nanoseconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Taker ``number``'s share: the next range nobody has taken, until none is left. */
static void take_ranges(int number)
{
    void *scratch = pool.scratch[number];
    for (;;) {
        int64_t range = atomic_fetch_add(&pool.next, 1);
        if (range >= pool.ranges)
            return;
        pool.entry(pool.cells, scratch, pool.bounds[range], pool.bounds[range + 1]);
    }
}

/* A launch after ``seen``: spun for, then slept for. */
static unsigned long next_generation(unsigned long seen)
{
    uint64_t until = now_nanoseconds() + SPIN_NANOSECONDS;
    for (unsigned spins = 0;; spins++) {
        unsigned long generation = atomic_load(&pool.generation);
        if (generation != seen)
            return generation;
        if ((spins & 63) == 63 && now_nanoseconds() > until)
            break;
        spin_pause();
    }
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.sleepers, 1);
    unsigned long generation;
    while ((generation = atomic_load(&pool.generation)) == seen)
        pthread_cond_wait(&pool.wake, &pool.lock);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.lock);
    return generation;
}

static void *pool_thread(void *argument)
{
    int number = (int)(intptr_t)argument;
    unsigned long seen = 0;
    for (;;) {
        seen = next_generation(seen);
        /* Joined only while the launch is open; the caller waits for every thread that joined
           (active), and closes the launch before it waits, so one that comes late leaves at once. */
        atomic_fetch_add(&pool.active, 1);
        if (atomic_load(&pool.open) && number < pool.takers)
            take_ranges(number);
        atomic_fetch_sub(&pool.active, 1);
    }
    return NULL;
}

static void forget_pool_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.started = 0;
    atomic_store(&pool.busy, 0); /* a launch another thread had running is not the child's */
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.open, 0);
    atomic_store(&pool.active, 0);
}

/* Pool threads up to ``count``: 0, or -1 where the system starts none (the caller then takes every
   range itself). */
static int start_pool_threads(int count)
{
    static int fork_handler;
    if (!fork_handler) {
        if (pthread_atfork(NULL, NULL, forget_pool_in_child) != 0)
            return -1;
        fork_handler = 1;
    }
    while (pool.started < count) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thread, &attributes, pool_thread, (void *)(intptr_t)(pool.started + 1));
        pthread_attr_destroy(&attributes);
        if (failed)
            return -1;
        pool.started++;
    }
    return 0;
}

/* ``call(cells, scratch[taker], bounds[i], bounds[i + 1])`` for every range i, the ranges taken in
   turn by this thread (taker 0) and takers - 1 pool threads; all on this thread where another
   launch has the pool or no thread can be started. Without the GIL. */
static void run_split(entry_function call, void *cells, void *const *scratch, int takers, const int64_t *bounds,
                      int64_t ranges)
{
    int alone = takers == 1 || atomic_exchange(&pool.busy, 1) != 0;
    if (!alone && start_pool_threads(takers - 1) < 0) {
        atomic_store(&pool.busy, 0);
        alone = 1;
    }
    if (alone) {
        for (int64_t i = 0; i < ranges; i++)
            call(cells, scratch[0], bounds[i], bounds[i + 1]);
        return;
    }
    pool.entry = call;
    pool.cells = cells;
    pool.scratch = scratch;
    pool.bounds = bounds;
    pool.ranges = ranges;
    pool.takers = takers;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.open, 1);
    atomic_fetch_add(&pool.generation, 1);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    take_ranges(0);
    atomic_store(&pool.open, 0);
    while (atomic_load(&pool.active) > 0) /* the last ranges, being run */
        spin_pause();
    atomic_store(&pool.busy, 0);
}

/* Read ``count`` addresses (ints or None, as 0) from a sequence into ``into``. */
static int addresses_of(PyObject *sequence, Py_ssize_t count, const char *name, uintptr_t *into)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sequence, i);
        if (item == Py_None) {
            into[i] = 0;
            continue;
        }
        into[i] = (uintptr_t)PyLong_AsVoidPtr(item);
        if (into[i] == 0 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "run_ranges: %s must be addresses", name);
            return -1;
        }
    }
    return 0;
}

static PyObject *run_ranges(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "run_ranges(entry, cells, scratch, bounds)");
        return NULL;
    }
    PyObject *scratch = PySequence_Fast(args[2], "run_ranges: scratch must be a sequence");
    PyObject *bounds = scratch == NULL ? NULL : PySequence_Fast(args[3], "run_ranges: bounds must be a sequence");
    PyObject *result = NULL;
    uintptr_t entry = (uintptr_t)PyLong_AsVoidPtr(args[0]), cells = (uintptr_t)PyLong_AsVoidPtr(args[1]);
    Py_ssize_t takers = scratch == NULL ? 0 : PySequence_Fast_GET_SIZE(scratch);
    Py_ssize_t ranges = bounds == NULL ? 0 : PySequence_Fast_GET_SIZE(bounds) - 1;
    uintptr_t *scratch_addresses = NULL;
    int64_t *range_bounds = NULL;
    if (bounds == NULL || PyErr_Occurred())
        goto done;
    if (entry == 0 || takers < 1 || takers > MAX_POOL_THREADS + 1 || ranges < 1) {
        PyErr_SetString(PyExc_ValueError, "run_ranges: an entry, 1 to 257 scratches and at least one range");
        goto done;
    }
    scratch_addresses = PyMem_Calloc(takers, sizeof(uintptr_t));
    range_bounds = PyMem_Calloc(ranges + 1, sizeof(int64_t));
    if (scratch_addresses == NULL || range_bounds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (addresses_of(scratch, takers, "scratch", scratch_addresses) < 0)
        goto done;
    for (Py_ssize_t i = 0; i <= ranges; i++) {
        range_bounds[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(bounds, i));
        if (range_bounds[i] == -1 && PyErr_Occurred())
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_split((entry_function)entry, (void *)cells, (void *const *)scratch_addresses, (int)takers, range_bounds, ranges);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(scratch_addresses);
    PyMem_Free(range_bounds);
    Py_XDECREF(scratch);
    Py_XDECREF(bounds);
    return result;
}

#endif

static PyMethodDef module_methods[] = {
    {"leased_array", (PyCFunction)(void (*)(void))leased_array, METH_FASTCALL,
     "leased_array(lease, address, shape, dtype): a C-contiguous array over a pooled block, based on its lease"},
#ifndef _WIN32
    {"run_ranges", (PyCFunction)(void (*)(void))run_ranges, METH_FASTCALL,
     "run_ranges(entry, cells, scratch, bounds): entry(cells, scratch[taker], bounds[i], bounds[i + 1]) "
     "for every range i, the ranges taken in turn by this thread and len(scratch) - 1 pool threads"},
#endif
    {NULL, NULL, 0, NULL},
};


static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_launch",
    .m_doc = "Calling compiled CPU kernels on arrays, in C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__launch(void)
{
    import_array();
    if (PyType_Ready(&KernelCallType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL)
        return NULL;
    if (PyModule_AddIntConstant(module, "INTERFACE_VERSION", INTERFACE_VERSION) < 0 ||
        PyModule_AddObjectRef(module, "KernelCall", (PyObject *)&KernelCallType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
