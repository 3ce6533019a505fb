/* Calling a compiled CPU kernel on arrays: the last step of every materialization.

   A kernel's entry (codegen/llvm.py) takes a block of 8-byte cells: the data pointer of each input
   and output, the element strides of each strided input and output, then each scalar parameter in its loop
   dtype, in the low bytes of its cell. ``backends.cpu._Launcher`` packs them with ``struct`` and
   calls through ctypes, about 3 us: a quarter of a small cached trace's time. ``KernelCall.run``
   does the same in C for a call on one thread. It declines (returns False, having run nothing)
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
#define INTERFACE_VERSION 1
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
} KernelCall;

static const char PARAM_CODES[] = "?bhiqBHIQfd";

static void kernel_call_dealloc(KernelCall *self)
{
    PyMem_Free(self->strided);
    PyMem_Free(self->param_codes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int kernel_call_init(KernelCall *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"entry", "inputs", "outputs", "strided", "ndim", "param_codes", "param_cell",
                               "cell_count", "rows", NULL};
    unsigned long long entry;
    PyObject *strided;
    const char *codes;
    Py_ssize_t codes_length;
    long long rows;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KnnO!ns#nnL", keywords, &entry, &self->inputs,
                                     &self->outputs, &PyTuple_Type, &strided, &self->ndim, &codes,
                                     &codes_length, &self->param_cell, &self->cell_count, &rows))
        return -1;
    self->entry = (entry_function)(uintptr_t)entry;
    self->rows = rows;
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
    int64_t stack_cells[STACK_CELLS];
    int64_t *cells = stack_cells;
    if (self->cell_count > STACK_CELLS) {
        cells = PyMem_Calloc(self->cell_count, sizeof(int64_t));
        if (cells == NULL)
            return PyErr_NoMemory();
    } else {
        memset(cells, 0, self->cell_count * sizeof(int64_t));
    }
    int filled = fill_cells(self, inputs, params, outputs, cells);
    if (filled) {
        Py_BEGIN_ALLOW_THREADS
        self->entry(cells, NULL, 0, self->rows);
        Py_END_ALLOW_THREADS
    }
    if (cells != stack_cells)
        PyMem_Free(cells);
    return PyBool_FromLong(filled);
}

static PyMethodDef kernel_call_methods[] = {
    {"run", (PyCFunction)(void (*)(void))kernel_call_run, METH_FASTCALL,
     "run(inputs, params, outputs) -> bool: run the kernel over all its rows on this thread; False, "
     "having run nothing, where the Python packing must do it"},
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

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_launch",
    .m_doc = "Calling compiled CPU kernels on arrays, in C.",
    .m_size = -1,
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
