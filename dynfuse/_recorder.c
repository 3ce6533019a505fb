/* The recorder's hot path in C: what runs once per recorded array operation.

   Recording is the dispatch cost of every lazy op, and in Python it is bytecode: about 3 us an op,
   where NumPy's own dispatch is about 1 us. This module does what ``trace.Node.__init__``,
   ``trace.structure_id``, ``trace.replay_key`` and ``record.record_common`` do, on the same objects: nodes and lazy
   arrays are instances of the Python classes, allocated here with their ``__slots__`` written at
   the offsets Python gave them, so each class keeps one definition, in Python. Those Python
   functions stay the reference, used where this extension was not built or is switched off
   (``DYNFUSE_PURE_PYTHON=1``); tests hold the two to the same results (tests/test_recorder.py).

   ``dynfuse.accelerate`` binds the module to the Python objects it works on (``bind``) and
   installs its functions in their place. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* What dynfuse.accelerate checks, so a stale build is never used with newer Python code. */
#define INTERFACE_VERSION 3

enum { OP, INPUTS, PARAMS, SHAPE, DTYPE, BUFFER, EXPOSED, DEVICE, DEPTH, KEY, LEAVES, ANCESTORS, NODE_SLOTS };
static const char *const node_slot_names[NODE_SLOTS] = {
    "op", "inputs", "params", "shape", "dtype", "buffer", "exposed", "device", "depth", "key", "leaves", "ancestors",
};
enum { ARRAY_NODE, ARRAY_BASE, ARRAY_VIEWS, ARRAY_SLOTS };
static const char *const array_slot_names[ARRAY_SLOTS] = {"_node", "_base", "_views"};

/* Everything ``bind`` hands over; strong references, held for the life of the process. */
static struct {
    PyTypeObject *node_type, *array_type;
    Py_ssize_t node_offsets[NODE_SLOTS], array_offsets[ARRAY_SLOTS];
    PyObject *trace_module;    /* for STRUCTURE_TABLE_LIMIT and REPLAY_KEY_LIMIT, read when used */
    PyObject *config_module;   /* for max_depth, read when used */
    PyObject *structure_ids;   /* trace._structure_ids */
    PyObject *new_structure_id;
    PyObject *thread_state;    /* trace._thread: .recording */
    PyObject *start_thread;    /* trace._pending.start_thread */
    PyObject *scalar_op;       /* ops.SCALAR */
    PyObject *unary;           /* record._UNARY */
    PyObject *common_dtypes;   /* record._common_dtypes */
    PyObject *common_result;   /* record._common_result */
    PyObject *bound_depth;     /* record.bound_depth */
    PyObject *mixed_devices;   /* trace.mixed_devices */
    PyObject *host;            /* devices.HOST */
    PyObject *direct_elements; /* tiers.direct_elements */
    PyObject *numpy_scalar;    /* numpy.generic */
    PyObject *buffer_op;       /* ops.BUFFER */
    PyObject *thread_counters; /* stats.thread_counters */
    PyObject *pending;         /* trace._pending */
    PyObject *registry_module; /* for backend, read when used */
    PyObject *stats_local;     /* stats._local: .counters, this thread's */
    PyObject *matmul;          /* ops.BARRIERS["matmul"] */
    PyObject *str_recording, *str_refs, *str_counters, *str_sweep_at, *str_sweep, *str_ops_recorded;
    PyObject *str_table_limit, *str_key_limit, *str_max_depth, *str_reference, *str_direct_ops, *str_recordings, *str_add_view, *str_direct, *str_tiers, *str_backend, *str_out;
    PyObject *zero, *one, *empty; /* 0, 1 and () */
    int bound;
} S;

#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))
#define NODE_SLOT(node, slot) SLOT(node, S.node_offsets[slot])
#define ARRAY_SLOT(array, slot) SLOT(array, S.array_offsets[slot])

/* Write a slot: steals ``value``, and releases what the slot held (NULL in a fresh object). */
static inline void set_slot(PyObject *object, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(object, offset);
    SLOT(object, offset) = value;
    Py_XDECREF(old);
}

static int slot_offsets(PyTypeObject *type, const char *const *names, Py_ssize_t *offsets, int count)
{
    for (int i = 0; i < count; i++) {
        PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descriptor == NULL)
            return -1;
        int ok = Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
                 && ((PyMemberDescrObject *)descriptor)->d_member->type == T_OBJECT_EX;
        if (ok)
            offsets[i] = ((PyMemberDescrObject *)descriptor)->d_member->offset;
        Py_DECREF(descriptor);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

static Py_ssize_t module_int(PyObject *module, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(module, name);
    if (value == NULL)
        return -1;
    Py_ssize_t result = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return result;
}

/* trace.structure_id: a new reference to the id of ``description``. */
static PyObject *intern_structure(PyObject *description)
{
    PyObject *found = PyDict_GetItemWithError(S.structure_ids, description);
    if (found != NULL)
        return Py_NewRef(found);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t limit = module_int(S.trace_module, S.str_table_limit);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    if (PyDict_GET_SIZE(S.structure_ids) >= limit)
        PyDict_Clear(S.structure_ids);
    found = PyObject_CallNoArgs(S.new_structure_id);
    if (found == NULL)
        return NULL;
    if (PyDict_SetItem(S.structure_ids, description, found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

/* What trace._Recording keeps for every node with inputs: a weak reference, and the count. */
static int register_pending(PyObject *node)
{
    PyObject *recording = PyObject_GetAttr(S.thread_state, S.str_recording);
    if (recording == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        recording = PyObject_CallNoArgs(S.start_thread);
        if (recording == NULL)
            return -1;
    }
    int status = -1;
    PyObject *refs = NULL, *ref = NULL, *counters = NULL, *sweep_at = NULL;
    if ((refs = PyObject_GetAttr(recording, S.str_refs)) == NULL || !PyList_Check(refs))
        goto done;
    if ((ref = PyWeakref_NewRef(node, NULL)) == NULL || PyList_Append(refs, ref) < 0)
        goto done;
    if ((counters = PyObject_GetAttr(recording, S.str_counters)) == NULL)
        goto done;
    PyObject *count = PyDict_GetItemWithError(counters, S.str_ops_recorded);
    if (count == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyError, "ops_recorded");
        goto done;
    }
    PyObject *one = PyLong_FromLong(1), *sum = PyNumber_Add(count, one);
    Py_DECREF(one);
    if (sum == NULL)
        goto done;
    int stored = PyDict_SetItem(counters, S.str_ops_recorded, sum);
    Py_DECREF(sum);
    if (stored < 0 || (sweep_at = PyObject_GetAttr(recording, S.str_sweep_at)) == NULL)
        goto done;
    Py_ssize_t threshold = PyLong_AsSsize_t(sweep_at);
    if (threshold == -1 && PyErr_Occurred())
        goto done;
    if (PyList_GET_SIZE(refs) >= threshold) {
        PyObject *swept = PyObject_CallMethodNoArgs(recording, S.str_sweep);
        if (swept == NULL)
            goto done;
        Py_DECREF(swept);
    }
    status = 0;
done:
    Py_XDECREF(sweep_at);
    Py_XDECREF(counters);
    Py_XDECREF(ref);
    Py_XDECREF(refs);
    Py_DECREF(recording);
    return status;
}

/* Write every slot of a node not exposed to NumPy: the first seven values borrowed, the last four
   stolen. */
static void set_node_slots(PyObject *node, PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape,
                           PyObject *dtype, PyObject *buffer, PyObject *device, PyObject *depth, PyObject *key,
                           PyObject *leaves, PyObject *ancestors)
{
    PyObject *values[NODE_SLOTS] = {
        Py_NewRef(op),     Py_NewRef(inputs), Py_NewRef(params), Py_NewRef(shape), Py_NewRef(dtype),
        Py_NewRef(buffer), Py_NewRef(Py_False), Py_NewRef(device), depth, key, leaves, ancestors,
    };
    for (int slot = 0; slot < NODE_SLOTS; slot++)
        set_slot(node, S.node_offsets[slot], values[slot]);
}

/* Whether a node's slots are what init_node reads them as (a node made by __new__ may not be). */
static int complete_node(PyObject *node)
{
    PyObject *depth = NODE_SLOT(node, DEPTH), *key = NODE_SLOT(node, KEY), *inputs = NODE_SLOT(node, INPUTS);
    PyObject *leaves = NODE_SLOT(node, LEAVES), *ancestors = NODE_SLOT(node, ANCESTORS);
    if (depth && key && inputs && leaves && ancestors && NODE_SLOT(node, DEVICE) && PyLong_CheckExact(depth) && PyTuple_CheckExact(inputs)
        && PyTuple_CheckExact(leaves) && PyTuple_CheckExact(ancestors))
        return 1;
    PyErr_SetString(PyExc_TypeError, "an input node is not fully initialized");
    return 0;
}

/* trace.Node.__init__, on a node whose slots may be unset (fresh) or set (re-initialized). */
static int init_node(PyObject *self, PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape,
                     PyObject *dtype)
{
    if (!PyTuple_CheckExact(inputs)) {
        PyErr_Format(PyExc_TypeError, "Node inputs must be a tuple, not %.100s", Py_TYPE(inputs)->tp_name);
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(inputs), leaf_count = 0, ancestor_count = 0;
    long depth = 0;
    int keyless = 0;
    PyObject *device = Py_None; /* borrowed: the inputs' memory (trace.Node.device) */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *child = PyTuple_GET_ITEM(inputs, i);
        if (!PyObject_TypeCheck(child, S.node_type)) {
            PyErr_Format(PyExc_TypeError, "Node inputs must be nodes, not %.100s", Py_TYPE(child)->tp_name);
            return -1;
        }
        if (!complete_node(child))
            return -1;
        long child_depth = PyLong_AsLong(NODE_SLOT(child, DEPTH));
        if (child_depth == -1 && PyErr_Occurred())
            return -1;
        if (child_depth >= depth)
            depth = child_depth + 1;
        PyObject *child_device = NODE_SLOT(child, DEVICE);
        if (child_device != device && child_device != Py_None) {
            if (device != Py_None) { /* raises TypeError, naming the op and the devices */
                PyObject *raised = PyObject_CallFunctionObjArgs(S.mixed_devices, op, inputs, NULL);
                Py_XDECREF(raised);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "operands on different devices");
                return -1;
            }
            device = child_device;
        }
        keyless |= NODE_SLOT(child, KEY) == Py_None;
        if (PyTuple_GET_SIZE(NODE_SLOT(child, INPUTS)) > 0) {
            leaf_count += PyTuple_GET_SIZE(NODE_SLOT(child, LEAVES));
            ancestor_count += PyTuple_GET_SIZE(NODE_SLOT(child, ANCESTORS)) + 1;
        } else {
            leaf_count += 1;
        }
    }
    Py_ssize_t key_limit = module_int(S.trace_module, S.str_key_limit);
    if (key_limit == -1 && PyErr_Occurred())
        return -1;
    PyObject *key, *leaves, *ancestors;
    if (keyless || leaf_count + ancestor_count > key_limit) {
        key = Py_NewRef(Py_None);
        leaves = Py_NewRef(S.empty);
        ancestors = Py_NewRef(S.empty);
    } else {
        PyObject *description = PyTuple_New(2 + count);
        leaves = PyTuple_New(leaf_count);
        ancestors = PyTuple_New(ancestor_count);
        if (description == NULL || leaves == NULL || ancestors == NULL) {
            Py_XDECREF(description);
            Py_XDECREF(leaves);
            Py_XDECREF(ancestors);
            return -1;
        }
        PyTuple_SET_ITEM(description, 0, Py_NewRef(op));
        PyTuple_SET_ITEM(description, 1, Py_NewRef(params));
        Py_ssize_t leaf = 0, ancestor = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *child = PyTuple_GET_ITEM(inputs, i);
            PyTuple_SET_ITEM(description, 2 + i, Py_NewRef(NODE_SLOT(child, KEY)));
            if (PyTuple_GET_SIZE(NODE_SLOT(child, INPUTS)) > 0) {
                PyObject *child_leaves = NODE_SLOT(child, LEAVES), *child_ancestors = NODE_SLOT(child, ANCESTORS);
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(child_leaves); j++)
                    PyTuple_SET_ITEM(leaves, leaf++, Py_NewRef(PyTuple_GET_ITEM(child_leaves, j)));
                for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(child_ancestors); j++)
                    PyTuple_SET_ITEM(ancestors, ancestor++, Py_NewRef(PyTuple_GET_ITEM(child_ancestors, j)));
                PyTuple_SET_ITEM(ancestors, ancestor++, Py_NewRef(child));
            } else {  /* a leaf does not list itself: that would be a cycle */
                PyTuple_SET_ITEM(leaves, leaf++, Py_NewRef(child));
            }
        }
        key = intern_structure(description);
        Py_DECREF(description);
        if (key == NULL) {
            Py_DECREF(leaves);
            Py_DECREF(ancestors);
            return -1;
        }
    }
    PyObject *depth_object = PyLong_FromLong(depth);
    if (leaves == NULL || ancestors == NULL || depth_object == NULL) {
        Py_DECREF(key);
        Py_XDECREF(leaves);
        Py_XDECREF(ancestors);
        Py_XDECREF(depth_object);
        return -1;
    }
    set_node_slots(self, op, inputs, params, shape, dtype, Py_None, device, depth_object, key, leaves, ancestors);
    return count > 0 ? register_pending(self) : 0;
}

static PyObject *new_node(PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape, PyObject *dtype)
{
    PyObject *node = S.node_type->tp_alloc(S.node_type, 0);
    if (node != NULL && init_node(node, op, inputs, params, shape, dtype) < 0)
        Py_CLEAR(node);
    return node;
}

/* trace.Node.scalar */
static PyObject *new_scalar(PyObject *value)
{
    PyObject *key = intern_structure((PyObject *)Py_TYPE(value));
    if (key == NULL)
        return NULL;
    PyObject *node = S.node_type->tp_alloc(S.node_type, 0);
    if (node == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    set_node_slots(node, S.scalar_op, S.empty, S.empty, S.empty, Py_None, value, Py_None, Py_NewRef(S.zero), key,
                   Py_NewRef(S.empty), Py_NewRef(S.empty));
    return node;
}

static int is_weak_scalar(PyObject *value)
{
    if (PyFloat_CheckExact(value) || PyBool_Check(value))
        return 1;
    if (!PyLong_CheckExact(value))
        return 0;
    int overflow;
    long small = PyLong_AsLongAndOverflow(value, &overflow);
    return !overflow && 0 <= small && small <= 127;
}

#define BIND_CHECK()                                                                           \
    do {                                                                                       \
        if (!S.bound) {                                                                        \
            PyErr_SetString(PyExc_RuntimeError, "dynfuse._recorder is not bound to dynfuse"); \
            return NULL;                                                                       \
        }                                                                                      \
    } while (0)

/* The size of a shape tuple; -1 with an error set. */
static Py_ssize_t shape_size(PyObject *shape)
{
    Py_ssize_t size = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++) {
        Py_ssize_t extent = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (extent == -1 && PyErr_Occurred())
            return -1;
        size *= extent;
    }
    return size;
}

/* Add one to this thread's stats counter ``name`` (stats.count). */
static int count(PyObject *name)
{
    PyObject *counters = PyObject_GetAttr(S.stats_local, S.str_counters);
    if (counters == NULL) { /* this thread's first count */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        if ((counters = PyObject_CallNoArgs(S.thread_counters)) == NULL)
            return -1;
    }
    PyObject *value = PyDict_GetItemWithError(counters, name), *sum = NULL;
    int status = -1;
    if (value != NULL && (sum = PyNumber_Add(value, S.one)) != NULL)
        status = PyDict_SetItem(counters, name, sum);
    else if (value == NULL && !PyErr_Occurred())
        PyErr_SetObject(PyExc_KeyError, name);
    Py_XDECREF(sum);
    Py_DECREF(counters);
    return status;
}

/* trace.Node.leaf(array, exposed=False) for a host ndarray: its key is the structure id of
   trace.buffer_key(array). */
static PyObject *host_leaf(PyObject *array)
{
    PyArrayObject *values = (PyArrayObject *)array;
    int ndim = PyArray_NDIM(values);
    PyObject *shape = PyTuple_New(ndim), *layout = NULL, *description = NULL, *key = NULL, *node = NULL;
    if (shape == NULL)
        return NULL;
    for (int axis = 0; axis < ndim; axis++) {
        PyObject *extent = PyLong_FromSsize_t(PyArray_DIM(values, axis));
        if (extent == NULL)
            goto done;
        PyTuple_SET_ITEM(shape, axis, extent);
    }
    if (PyArray_IS_C_CONTIGUOUS(values)) {
        layout = Py_NewRef(Py_None);
    } else {
        if ((layout = PyTuple_New(ndim)) == NULL)
            goto done;
        for (int axis = 0; axis < ndim; axis++) {
            PyObject *stride = PyLong_FromSsize_t(PyArray_STRIDE(values, axis));
            if (stride == NULL)
                goto done;
            PyTuple_SET_ITEM(layout, axis, stride);
        }
    }
    PyObject *dtype = (PyObject *)PyArray_DESCR(values);
    if ((description = PyTuple_Pack(3, dtype, shape, layout)) == NULL || (key = intern_structure(description)) == NULL)
        goto done;
    if ((node = S.node_type->tp_alloc(S.node_type, 0)) == NULL)
        goto done;
    set_node_slots(node, S.buffer_op, S.empty, S.empty, shape, dtype, array, S.host, Py_NewRef(S.zero), key,
                   Py_NewRef(S.empty), Py_NewRef(S.empty));
    key = NULL; /* stolen */
done:
    Py_XDECREF(key);
    Py_XDECREF(description);
    Py_XDECREF(layout);
    Py_DECREF(shape);
    return node;
}

/* A lazy array over ``node`` (stolen), with no base. */
static PyObject *new_array(PyObject *node)
{
    PyObject *lazy = S.array_type->tp_alloc(S.array_type, 0);
    if (lazy == NULL) {
        Py_DECREF(node);
        return NULL;
    }
    set_slot(lazy, S.array_offsets[ARRAY_NODE], node);
    set_slot(lazy, S.array_offsets[ARRAY_BASE], Py_NewRef(Py_None));
    set_slot(lazy, S.array_offsets[ARRAY_VIEWS], Py_NewRef(Py_None));
    return lazy;
}

/* direct.result: NumPy's fresh result (stolen) as a lazy array over a leaf, a scalar as it is. */
static PyObject *direct_result(PyObject *made)
{
    if (count(S.str_direct_ops) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    if (!PyArray_Check(made))
        return made;
    PyObject *node = host_leaf(made);
    Py_DECREF(made);
    return node == NULL ? NULL : new_array(node);
}

/* LazyArray._add_view(base, view): a weak reference appended to the base's list; the Python
   method where the list is due to be pruned (its length a power of two, 16 or more). */
static int register_view(PyObject *base, PyObject *view)
{
    PyObject *list = ARRAY_SLOT(base, ARRAY_VIEWS);
    if (list == NULL || list == Py_None) {
        if ((list = PyList_New(0)) == NULL)
            return -1;
        set_slot(base, S.array_offsets[ARRAY_VIEWS], list);
    }
    Py_ssize_t length = PyList_CheckExact(list) ? PyList_GET_SIZE(list) : 0;
    if (!PyList_CheckExact(list) || (length >= 16 && !(length & (length - 1)))) {
        PyObject *done = PyObject_CallMethodOneArg(base, S.str_add_view, view);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    PyObject *ref = PyWeakref_NewRef(view, NULL);
    int status = ref == NULL ? -1 : PyList_Append(list, ref);
    Py_XDECREF(ref);
    return status;
}

/* direct.view(array, viewed): a lazy array over a leaf of ``viewed``, a NumPy view of the array's
   buffer, registered as a view of the array's base. */
static PyObject *direct_view(PyObject *array, PyObject *viewed)
{
    PyObject *base = ARRAY_SLOT(array, ARRAY_BASE);
    if (base == NULL || base == Py_None)
        base = array;
    if (count(S.str_direct_ops) < 0)
        return NULL;
    PyObject *node = host_leaf(viewed);
    PyObject *lazy = node == NULL ? NULL : new_array(node);
    if (lazy == NULL)
        return NULL;
    set_slot(lazy, S.array_offsets[ARRAY_BASE], Py_NewRef(base));
    if (register_view(base, lazy) < 0)
        Py_CLEAR(lazy);
    return lazy;
}

/* tiers.direct_elements(); -1 with an error set. It is read on every element access, so it is
   kept while the settings it depends on (config.direct, config.tiers, registry.backend) are the
   same objects: a backend's Target is fixed once the backend is made. */
static Py_ssize_t direct_limit(void)
{
    static PyObject *seen[3];
    static Py_ssize_t kept = -1;
    PyObject *now[3] = {
        PyObject_GetAttr(S.config_module, S.str_direct),
        PyObject_GetAttr(S.config_module, S.str_tiers),
        PyObject_GetAttr(S.registry_module, S.str_backend),
    };
    int same = kept >= 0;
    for (int i = 0; i < 3; i++) {
        if (now[i] == NULL) {
            for (int j = 0; j < 3; j++)
                Py_XDECREF(now[j]);
            return -1;
        }
        same &= now[i] == seen[i];
    }
    if (!same) {
        PyObject *limit = PyObject_CallNoArgs(S.direct_elements);
        Py_ssize_t value = limit == NULL ? -1 : PyLong_AsSsize_t(limit);
        Py_XDECREF(limit);
        if (value == -1) {
            for (int j = 0; j < 3; j++)
                Py_DECREF(now[j]);
            return -1;
        }
        for (int i = 0; i < 3; i++) {
            Py_XSETREF(seen[i], now[i]);
            now[i] = NULL;
        }
        kept = value;
    }
    for (int j = 0; j < 3; j++)
        Py_XDECREF(now[j]);
    return kept;
}

/* Whether the node holds a buffer in host memory (trace.Node with no inputs, on devices.HOST). */
static int computed_on_host(PyObject *node)
{
    PyObject *inputs = NODE_SLOT(node, INPUTS);
    return inputs != NULL && PyTuple_CheckExact(inputs) && PyTuple_GET_SIZE(inputs) == 0
           && NODE_SLOT(node, DEVICE) == S.host && NODE_SLOT(node, BUFFER) != NULL;
}

/* direct: the op's reference called now on the operands' buffers and scalars. */
static PyObject *run_direct(PyObject *op, PyObject *const *operands, Py_ssize_t count)
{
    PyObject *values[2];
    for (Py_ssize_t i = 0; i < count; i++)
        values[i] = Py_IS_TYPE(operands[i], S.array_type) ? NODE_SLOT(ARRAY_SLOT(operands[i], ARRAY_NODE), BUFFER)
                                                          : operands[i];
    PyObject *reference = PyObject_GetAttr(op, S.str_reference);
    if (reference == NULL)
        return NULL;
    PyObject *made = PyObject_Vectorcall(reference, values, count, NULL);
    Py_DECREF(reference);
    return made == NULL ? NULL : direct_result(made);
}

/* The elements of two shapes broadcast together (of one, ``second`` NULL): an upper bound where
   they do not broadcast. -1 with an error set. */
static Py_ssize_t broadcast_size(PyObject *first, PyObject *second)
{
    if (second == NULL)
        return shape_size(first);
    Py_ssize_t ndim_first = PyTuple_GET_SIZE(first), ndim_second = PyTuple_GET_SIZE(second);
    Py_ssize_t ndim = ndim_first > ndim_second ? ndim_first : ndim_second, size = 1;
    for (Py_ssize_t axis = 0; axis < ndim; axis++) {
        Py_ssize_t extent = 1;
        for (int which = 0; which < 2; which++) {
            PyObject *shape = which ? second : first;
            Py_ssize_t offset = axis - (ndim - PyTuple_GET_SIZE(shape));
            if (offset < 0)
                continue;
            Py_ssize_t here = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, offset));
            if (here == -1 && PyErr_Occurred())
                return -1;
            if (here > extent)
                extent = here;
        }
        size *= extent;
    }
    return size;
}

/* record.record_common(op, first[, second]) */
static PyObject *record_common(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "record_common takes 2 or 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *op = args[0], *operands[2] = {args[1], nargs == 3 ? args[2] : S.unary};
    if (operands[1] == S.unary)
        nargs = 2;
    PyObject *nodes[2] = {NULL, NULL}, *kinds[2] = {NULL, NULL}, *result = NULL;
    PyObject *array = NULL; /* borrowed: the operand node whose shape the result has */
    Py_ssize_t count = nargs - 1;
    /* every lazy operand holds a host buffer; NumPy scalars seen; the lazy operands' shapes agree */
    int computed = 1, numpy_scalars = 0, same_shapes = 1;
    PyObject *other_shape = NULL; /* borrowed: the first lazy operand's shape, where there are two */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *operand = operands[i];
        if (Py_IS_TYPE(operand, S.array_type)) {
            PyObject *node = ARRAY_SLOT(operand, ARRAY_NODE);
            if (node == NULL) {
                PyErr_SetString(PyExc_AttributeError, "LazyArray has no node");
                return NULL;
            }
            if (array != NULL) {
                other_shape = NODE_SLOT(array, SHAPE);
                int same = PyObject_RichCompareBool(NODE_SLOT(node, SHAPE), other_shape, Py_EQ);
                if (same < 0)
                    return NULL;
                same_shapes = same;
            }
            computed &= computed_on_host(node);
            kinds[i] = NODE_SLOT(node, DTYPE);
            array = node;
        } else if (is_weak_scalar(operand)) {
            kinds[i] = (PyObject *)Py_TYPE(operand);
        } else if (!PyErr_Occurred() && PyObject_TypeCheck(operand, (PyTypeObject *)S.numpy_scalar)) {
            numpy_scalars = 1;
        } else {
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        }
    }
    if (array == NULL) /* scalars alone */
        return Py_NewRef(Py_None);
    if (computed) { /* operands broadcast: NumPy's call raises NumPy's error where they do not */
        Py_ssize_t size = broadcast_size(NODE_SLOT(array, SHAPE), same_shapes ? NULL : other_shape);
        if (size == -1)
            return NULL;
        Py_ssize_t limit = direct_limit();
        if (limit == -1 && PyErr_Occurred())
            return NULL;
        if (size < limit)
            return run_direct(op, operands, count);
    }
    if (numpy_scalars || !same_shapes)
        return Py_NewRef(Py_None);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (Py_IS_TYPE(operands[i], S.array_type))
            nodes[i] = Py_NewRef(ARRAY_SLOT(operands[i], ARRAY_NODE));
        else if ((nodes[i] = new_scalar(operands[i])) == NULL)
            goto done;
    }
    PyObject *inputs = count == 1 ? PyTuple_Pack(1, nodes[0]) : PyTuple_Pack(2, nodes[0], nodes[1]);
    PyObject *key = count == 1 ? PyTuple_Pack(2, op, kinds[0]) : PyTuple_Pack(3, op, kinds[0], kinds[1]);
    PyObject *dtype = NULL;
    if (inputs == NULL || key == NULL)
        goto release;
    dtype = PyDict_GetItemWithError(S.common_dtypes, key);
    if (dtype != NULL) {
        Py_INCREF(dtype);
    } else {
        if (PyErr_Occurred())
            goto release;
        dtype = PyObject_CallFunctionObjArgs(S.common_result, op, inputs, NULL);
        if (dtype == NULL || PyDict_SetItem(S.common_dtypes, key, dtype) < 0)
            goto release;
    }
    if (dtype == Py_False) {
        result = Py_NewRef(Py_None);
        goto release;
    }
    PyObject *node = new_node(op, inputs, S.empty, NODE_SLOT(array, SHAPE), dtype);
    if (node == NULL)
        goto release;
    PyObject *lazy = S.array_type->tp_alloc(S.array_type, 0);
    if (lazy == NULL) {
        Py_DECREF(node);
        goto release;
    }
    set_slot(lazy, S.array_offsets[ARRAY_NODE], node);
    set_slot(lazy, S.array_offsets[ARRAY_BASE], Py_NewRef(Py_None));
    set_slot(lazy, S.array_offsets[ARRAY_VIEWS], Py_NewRef(Py_None));
    /* record.bound_depth, called only when it has something to do */
    Py_ssize_t max_depth = module_int(S.config_module, S.str_max_depth);
    long depth = PyLong_AsLong(NODE_SLOT(node, DEPTH));
    if ((max_depth == -1 || depth == -1) && PyErr_Occurred()) {
        Py_DECREF(lazy);
        goto release;
    }
    if (depth >= max_depth) {
        result = PyObject_CallOneArg(S.bound_depth, lazy);
        Py_DECREF(lazy);
    } else {
        result = lazy;
    }
release:
    Py_XDECREF(dtype);
    Py_XDECREF(key);
    Py_XDECREF(inputs);
done:
    Py_XDECREF(nodes[0]);
    Py_XDECREF(nodes[1]);
    return result;
}

/* LazyArray methods whose common case record_common records: an operator (its operand order:
   one operand, forward or reflected) or __array_ufunc__ (the op looked up by ufunc). When
   record_common declines, the Python method runs: it is the general path. */
enum { ORDER_UNARY, ORDER_FORWARD, ORDER_REFLECTED, ORDER_UFUNC, ORDER_GETITEM, ORDER_SETITEM, ORDER_IN_PLACE, ORDER_REDUCE };
static const char *const order_names[] = {"unary", "forward", "reflected", "ufunc", "getitem", "setitem", "in place", "reduce", NULL};

/* An index NumPy answers without reading another array: integers (NumPy's too), and, with
   ``slices``, slices, None and Ellipsis; alone or in a tuple (direct._is_view_index). */
static int plain_index(PyObject *index, int slices)
{
    PyObject *const *items = &index;
    Py_ssize_t count = 1;
    if (PyTuple_CheckExact(index)) {
        items = &PyTuple_GET_ITEM(index, 0);
        count = PyTuple_GET_SIZE(index);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = items[i];
        if (PyLong_CheckExact(item) || PyArray_IsScalar(item, Integer))
            continue;
        if (slices && (PySlice_Check(item) || item == Py_None || item == Py_Ellipsis))
            continue;
        return 0;
    }
    return 1;
}

/* Whether no node is pending in any thread: each recording's list of references is empty (a
   list not swept since its nodes were computed answers no; the Python path then sweeps it). */
static int nothing_pending(void)
{
    PyObject *recordings = PyObject_GetAttr(S.pending, S.str_recordings);
    if (recordings == NULL) {
        PyErr_Clear();
        return 0;
    }
    int empty = PyList_CheckExact(recordings);
    for (Py_ssize_t i = 0; empty && i < PyList_GET_SIZE(recordings); i++) {
        PyObject *refs = PyObject_GetAttr(PyList_GET_ITEM(recordings, i), S.str_refs);
        empty = refs != NULL && PyList_CheckExact(refs) && PyList_GET_SIZE(refs) == 0;
        if (refs == NULL)
            PyErr_Clear();
        Py_XDECREF(refs);
    }
    Py_DECREF(recordings);
    return empty;
}

/* direct.getitem for a computed host array and an index of integers, slices, None and Ellipsis:
   NumPy's scalar, or a small view. NULL without an error where it does not apply. */
static PyObject *read_elements(PyObject *self, PyObject *index)
{
    if (!Py_IS_TYPE(self, S.array_type)) /* called unbound, on another object */
        return NULL;
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE);
    if (node == NULL || !computed_on_host(node))
        return NULL;
    PyObject *gather = NULL; /* a computed lazy array as the index: NumPy's gather or mask, any size */
    if (Py_IS_TYPE(index, S.array_type)) {
        PyObject *by = ARRAY_SLOT(index, ARRAY_NODE);
        if (by == NULL || !computed_on_host(by))
            return NULL;
        gather = NODE_SLOT(by, BUFFER);
    } else if (!plain_index(index, 1)) {
        return NULL;
    }
    Py_ssize_t limit = direct_limit();
    if (limit <= 0) /* off, or an error set */
        return NULL;
    if (gather != NULL) {
        PyObject *gathered = PyObject_GetItem(NODE_SLOT(node, BUFFER), gather);
        return gathered == NULL ? NULL : direct_result(gathered);
    }
    PyObject *item = PyObject_GetItem(NODE_SLOT(node, BUFFER), index);
    if (item == NULL || !PyArray_Check(item))
        return item; /* the element, or NumPy's IndexError */
    PyObject *view = PyArray_SIZE((PyArrayObject *)item) < limit ? direct_view(self, item) : NULL;
    Py_DECREF(item); /* too large: recorded by the Python method */
    return view;
}

/* self op= other on a small computed host array while nothing is pending: the op's NumPy reference
   with out=self's buffer (direct.call_into). The array, NULL without an error where it does not
   apply, NULL with NumPy's error. */
static PyObject *update_in_place(PyObject *op, PyObject *self, PyObject *other)
{
    if (!Py_IS_TYPE(self, S.array_type)) /* called unbound, on another object */
        return NULL;
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE), *value = other;
    if (node == NULL || !computed_on_host(node))
        return NULL;
    if (Py_IS_TYPE(other, S.array_type)) {
        PyObject *source = ARRAY_SLOT(other, ARRAY_NODE);
        if (source == NULL || !computed_on_host(source))
            return NULL;
        value = NODE_SLOT(source, BUFFER);
    } else if (!(PyFloat_Check(other) || PyLong_Check(other) || PyObject_TypeCheck(other, (PyTypeObject *)S.numpy_scalar))) {
        return NULL;
    }
    Py_ssize_t size = shape_size(NODE_SLOT(node, SHAPE)), limit = size < 0 ? -1 : direct_limit();
    if (limit < 0 || size >= limit || !nothing_pending())
        return NULL;
    PyObject *reference = PyObject_GetAttr(op, S.str_reference);
    if (reference == NULL)
        return NULL;
    PyObject *buffer = NODE_SLOT(node, BUFFER);
    PyObject *call[3] = {buffer, value, buffer}, *names = PyTuple_Pack(1, S.str_out);
    PyObject *made = names == NULL ? NULL : PyObject_Vectorcall(reference, call, 2, names);
    Py_XDECREF(names);
    Py_DECREF(reference);
    if (made == NULL)
        return NULL;
    Py_DECREF(made);
    return count(S.str_direct_ops) < 0 ? NULL : Py_NewRef(self);
}

/* direct.library_call for a two-operand library call (matmul) on computed host arrays: its reference
   now, whatever the size. NULL without an error where it does not apply. */
static PyObject *library_now(PyObject *const *operands)
{
    for (int i = 0; i < 2; i++) {
        if (!Py_IS_TYPE(operands[i], S.array_type))
            return NULL;
        PyObject *node = ARRAY_SLOT(operands[i], ARRAY_NODE);
        if (node == NULL || !computed_on_host(node))
            return NULL;
    }
    Py_ssize_t limit = direct_limit();
    if (limit <= 0)
        return NULL;
    return run_direct(S.matmul, operands, 2);
}

/* x.sum(axis=..., keepdims=...) and the other reductions of a small computed host array, given
   no positional argument and only the keywords ``axis``, ``dtype``, ``keepdims`` and ``ddof``: the
   reduction's NumPy reference now (direct.reduce). NULL without an error where it does not apply. */
static PyObject *reduce_now(PyObject *op, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const allowed[] = {"axis", "dtype", "keepdims", "ddof", NULL};
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs != 1)
        return NULL;
    for (Py_ssize_t i = 0; i < keywords; i++) {
        int known = 0;
        for (int j = 0; allowed[j] != NULL && !known; j++)
            known = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), allowed[j]) == 0;
        if (!known)
            return NULL;
    }
    if (!Py_IS_TYPE(self, S.array_type)) /* called unbound, on another object */
        return NULL;
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE);
    if (node == NULL || !computed_on_host(node))
        return NULL;
    Py_ssize_t size = shape_size(NODE_SLOT(node, SHAPE)), limit = size < 0 ? -1 : direct_limit();
    if (limit < 0 || size >= limit)
        return NULL;
    PyObject *reference = PyObject_GetAttr(op, S.str_reference);
    if (reference == NULL)
        return NULL;
    PyObject *call[6] = {NODE_SLOT(node, BUFFER)};
    for (Py_ssize_t i = 0; i < keywords; i++)
        call[1 + i] = args[1 + i];
    PyObject *made = PyObject_Vectorcall(reference, call, 1, kwnames);
    Py_DECREF(reference);
    return made == NULL ? NULL : direct_result(made);
}

/* x[index] = value into a computed host array while nothing is pending: NumPy's assignment
   (direct.setitem). 1 written, 0 where it does not apply, -1 with NumPy's error. */
static int write_elements(PyObject *self, PyObject *index, PyObject *value)
{
    if (!Py_IS_TYPE(self, S.array_type)) /* called unbound, on another object */
        return 0;
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE);
    if (node == NULL || !computed_on_host(node) || !plain_index(index, 1))
        return 0;
    if (Py_IS_TYPE(value, S.array_type)) {
        PyObject *source = ARRAY_SLOT(value, ARRAY_NODE);
        if (source == NULL || !computed_on_host(source))
            return 0;
        value = NODE_SLOT(source, BUFFER);
    } else if (!(PyFloat_Check(value) || PyLong_Check(value) || PyComplex_Check(value)
                 || PyObject_TypeCheck(value, (PyTypeObject *)S.numpy_scalar) || PyArray_Check(value))) {
        return 0;
    }
    Py_ssize_t limit = direct_limit();
    if (limit <= 0)
        return limit == 0 ? 0 : -1;
    if (!nothing_pending())
        return 0;
    return PyObject_SetItem(NODE_SLOT(node, BUFFER), index, value) < 0 ? -1 : 1;
}

static PyObject *fast_method_call(PyObject *data, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    /* data: (op, or the ufunc -> op table; order; the Python method) */
    PyObject *op = PyTuple_GET_ITEM(data, 0), *general = PyTuple_GET_ITEM(data, 2);
    long order = PyLong_AsLong(PyTuple_GET_ITEM(data, 1));
    PyObject *operands[3] = {op, NULL, NULL};
    Py_ssize_t count = 0;
    if (order == ORDER_REDUCE && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) <= 4)) {
        PyObject *reduced = reduce_now(op, args[0], args, nargs, kwnames);
        if (reduced != NULL || PyErr_Occurred())
            return reduced;
    } else if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        if (order == ORDER_UNARY && nargs == 1) {
            operands[1] = args[0];
            count = 2;
        } else if (order == ORDER_FORWARD && nargs == 2) {
            operands[1] = args[0];
            operands[2] = args[1];
            count = 3;
        } else if (order == ORDER_REFLECTED && nargs == 2) {
            operands[1] = args[1];
            operands[2] = args[0];
            count = 3;
        } else if (order == ORDER_UFUNC && (nargs == 4 || nargs == 5) && PyUnicode_Check(args[2])
                   && PyUnicode_CompareWithASCIIString(args[2], "__call__") == 0) {
            operands[0] = PyDict_GetItemWithError(op, args[1]);
            if (operands[0] == NULL && PyErr_Occurred())
                return NULL;
            operands[1] = args[3];
            operands[2] = nargs == 5 ? args[4] : NULL;
            count = operands[0] == NULL ? 0 : nargs - 2;
        } else if (order == ORDER_GETITEM && nargs == 2) {
            PyObject *item = read_elements(args[0], args[1]);
            if (item != NULL || PyErr_Occurred())
                return item;
        } else if (order == ORDER_IN_PLACE && nargs == 2) {
            PyObject *updated = update_in_place(op, args[0], args[1]);
            if (updated != NULL || PyErr_Occurred())
                return updated;
        } else if (order == ORDER_SETITEM && nargs == 3) {
            int written = write_elements(args[0], args[1], args[2]);
            if (written != 0)
                return written < 0 ? NULL : Py_NewRef(Py_None);
        }
    }
    if (count == 3 && op == S.matmul) { /* a library call: at once, any size, on computed operands */
        PyObject *made = library_now(operands + 1);
        if (made != NULL || PyErr_Occurred())
            return made;
        count = 0;
    }
    if (count > 0) {
        PyObject *recorded = record_common(NULL, operands, count);
        if (recorded != Py_None)
            return recorded;  /* the new array, or NULL with the error set */
        Py_DECREF(recorded);
    }
    return PyObject_Vectorcall(general, args, nargs, kwnames);
}

static PyMethodDef fast_method_definition = {
    "fast_method", (PyCFunction)(void (*)(void))fast_method_call, METH_FASTCALL | METH_KEYWORDS,
    "A LazyArray method: record_common first, the Python method when it declines.",
};

static PyObject *fast_method(PyObject *module, PyObject *args)
{
    PyObject *op, *general;
    const char *order_name;
    if (!PyArg_ParseTuple(args, "OsO:fast_method", &op, &order_name, &general))
        return NULL;
    long order = 0;
    while (order_names[order] != NULL && strcmp(order_names[order], order_name) != 0)
        order++;
    if (order_names[order] == NULL || (order == ORDER_UFUNC && !PyDict_Check(op)) || !PyCallable_Check(general)) {
        PyErr_Format(PyExc_ValueError, "fast_method: bad order %s, table or method", order_name);
        return NULL;
    }
    PyObject *data = Py_BuildValue("(OlO)", op, order, general);
    if (data == NULL)
        return NULL;
    PyObject *function = PyCFunction_New(&fast_method_definition, data);
    Py_DECREF(data);
    if (function == NULL)
        return NULL;
    PyObject *method = PyInstanceMethod_New(function);  /* binds like a Python function */
    Py_DECREF(function);
    return method;
}

/* trace.Node.__init__(self, op, inputs, params, shape, dtype) */
static PyObject *node_init(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "Node() takes 5 arguments (%zd given)", nargs - 1);
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], S.node_type)) {
        PyErr_SetString(PyExc_TypeError, "Node.__init__ needs a Node");
        return NULL;
    }
    if (init_node(args[0], args[1], args[2], args[3], args[4], args[5]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* trace.replay_key(backend, node) */
static PyObject *replay_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs != 2 || !PyObject_TypeCheck(args[1], S.node_type)) {
        PyErr_SetString(PyExc_TypeError, "replay_key takes a backend and a node");
        return NULL;
    }
    PyObject *node = args[1], *key = NODE_SLOT(node, KEY), *leaves = NODE_SLOT(node, LEAVES);
    PyObject *ancestors = NODE_SLOT(node, ANCESTORS);
    if (!complete_node(node))
        return NULL;
    if (key == Py_None)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ancestors); i++) {
        PyObject *ancestor = PyTuple_GET_ITEM(ancestors, i);
        if (!complete_node(ancestor))
            return NULL;
        if (PyTuple_GET_SIZE(NODE_SLOT(ancestor, INPUTS)) == 0) /* materialized since */
            Py_RETURN_NONE;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(leaves);
    PyObject *pattern = PyTuple_New(count);
    if (pattern == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t first = 0;
        while (PyTuple_GET_ITEM(leaves, first) != PyTuple_GET_ITEM(leaves, i))
            first++;
        PyObject *position = PyLong_FromSsize_t(first);
        if (position == NULL) {
            Py_DECREF(pattern);
            return NULL;
        }
        PyTuple_SET_ITEM(pattern, i, position);
    }
    PyObject *result = PyTuple_Pack(3, args[0], key, pattern);
    Py_DECREF(pattern);
    return result;
}

static PyObject *structure_id(PyObject *module, PyObject *description)
{
    BIND_CHECK();
    return intern_structure(description);
}

static PyObject *bind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {
        "Node", "LazyArray", "trace_module", "config_module", "structure_ids", "new_structure_id",
        "thread_state", "start_thread", "scalar_op", "unary", "common_dtypes", "common_result",
        "bound_depth", "mixed_devices", "host", "direct_elements", "numpy_scalar", "buffer_op", "thread_counters", "pending", "registry_module", "stats_local", "matmul", NULL,
    };
    PyObject *node_type, *array_type, *objects[21];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OOO!OOOOOO!OOOOOO!OOOOOO:bind", names, &PyType_Type, &node_type,
                                     &PyType_Type, &array_type, &objects[0], &objects[1], &PyDict_Type,
                                     &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                                     &objects[7], &PyDict_Type, &objects[8], &objects[9], &objects[10],
                                     &objects[11], &objects[12], &objects[13], &PyType_Type, &objects[14],
                                     &objects[15], &objects[16], &objects[17], &objects[18], &objects[19],
                                     &objects[20]))
        return NULL;
    if (S.bound) {
        PyErr_SetString(PyExc_RuntimeError, "dynfuse._recorder is bound once");
        return NULL;
    }
    if (slot_offsets((PyTypeObject *)node_type, node_slot_names, S.node_offsets, NODE_SLOTS) < 0
        || slot_offsets((PyTypeObject *)array_type, array_slot_names, S.array_offsets, ARRAY_SLOTS) < 0)
        return NULL;
    S.node_type = (PyTypeObject *)Py_NewRef(node_type);
    S.array_type = (PyTypeObject *)Py_NewRef(array_type);
    PyObject **targets[21] = {
        &S.trace_module, &S.config_module, &S.structure_ids, &S.new_structure_id, &S.thread_state,
        &S.start_thread, &S.scalar_op, &S.unary, &S.common_dtypes, &S.common_result, &S.bound_depth,
        &S.mixed_devices, &S.host, &S.direct_elements, &S.numpy_scalar, &S.buffer_op,
        &S.thread_counters, &S.pending, &S.registry_module, &S.stats_local, &S.matmul,
    };
    for (int i = 0; i < 21; i++)
        *targets[i] = Py_NewRef(objects[i]);
    S.bound = 1;
    Py_RETURN_NONE;
}

/* direct.view(array, viewed) */
static PyObject *view(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs != 2 || !Py_IS_TYPE(args[0], S.array_type) || !PyArray_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "view takes a LazyArray and an ndarray");
        return NULL;
    }
    return direct_view(args[0], args[1]);
}

/* direct.result(value) */
static PyObject *result(PyObject *module, PyObject *value)
{
    BIND_CHECK();
    return direct_result(Py_NewRef(value));
}

static PyMethodDef methods[] = {
    {"result", result, METH_O, "direct.result in C."},
    {"view", (PyCFunction)(void (*)(void))view, METH_FASTCALL, "direct.view in C."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "Hand over the Python objects the recorder works on; once per process."},
    {"record_common", (PyCFunction)(void (*)(void))record_common, METH_FASTCALL,
     "record.record_common in C."},
    {"structure_id", structure_id, METH_O, "trace.structure_id in C."},
    {"fast_method", fast_method, METH_VARARGS,
     "fast_method(op or ufunc table, order, python_method): the method that records the common case in C."},
    {"replay_key", (PyCFunction)(void (*)(void))replay_key, METH_FASTCALL, "trace.replay_key in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "dynfuse._recorder", "The recorder's hot path in C.", -1, methods,
};

static PyMethodDef node_init_definition = {
    "__init__", (PyCFunction)(void (*)(void))node_init, METH_FASTCALL, "trace.Node.__init__ in C.",
};

PyMODINIT_FUNC PyInit__recorder(void)
{
    import_array();
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL)
        return NULL;
    /* An instancemethod binds like a Python function: usable as Node.__init__. */
    PyObject *function = PyCFunction_New(&node_init_definition, NULL);
    PyObject *method = function ? PyInstanceMethod_New(function) : NULL;
    Py_XDECREF(function);
    S.zero = PyLong_FromLong(0);
    S.one = PyLong_FromLong(1);
    S.empty = PyTuple_New(0);
    S.str_recording = PyUnicode_InternFromString("recording");
    S.str_refs = PyUnicode_InternFromString("refs");
    S.str_counters = PyUnicode_InternFromString("counters");
    S.str_sweep_at = PyUnicode_InternFromString("sweep_at");
    S.str_sweep = PyUnicode_InternFromString("sweep");
    S.str_ops_recorded = PyUnicode_InternFromString("ops_recorded");
    S.str_table_limit = PyUnicode_InternFromString("STRUCTURE_TABLE_LIMIT");
    S.str_key_limit = PyUnicode_InternFromString("REPLAY_KEY_LIMIT");
    S.str_max_depth = PyUnicode_InternFromString("max_depth");
    S.str_reference = PyUnicode_InternFromString("reference");
    S.str_direct_ops = PyUnicode_InternFromString("direct_ops");
    S.str_add_view = PyUnicode_InternFromString("_add_view");
    S.str_direct = PyUnicode_InternFromString("direct");
    S.str_tiers = PyUnicode_InternFromString("tiers");
    S.str_backend = PyUnicode_InternFromString("backend");
    S.str_out = PyUnicode_InternFromString("out");
    S.str_recordings = PyUnicode_InternFromString("_recordings");
    if (method == NULL || S.zero == NULL || S.empty == NULL || S.str_max_depth == NULL || S.str_reference == NULL || S.one == NULL || S.str_direct_ops == NULL || S.str_recordings == NULL || S.str_add_view == NULL || S.str_direct == NULL || S.str_tiers == NULL || S.str_backend == NULL || S.str_out == NULL
        || PyModule_AddObject(module, "node_init", method) < 0
        || PyModule_AddIntConstant(module, "INTERFACE_VERSION", INTERFACE_VERSION) < 0) {
        Py_XDECREF(method);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
