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
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define NPY_TARGET_VERSION NPY_2_0_API_VERSION
#include <numpy/arrayobject.h>

/* What dynfuse.accelerate checks, so a stale build is never used with newer Python code. */
#define INTERFACE_VERSION 16

enum { OP, INPUTS, PARAMS, SHAPE, DTYPE, BUFFER, EXPOSED, DEVICE, DEPTH, KEY, LEAVES, ANCESTORS, ERRSTATE, NODE_SLOTS };
static const char *const node_slot_names[NODE_SLOTS] = {
    "op", "inputs", "params", "shape", "dtype", "buffer", "exposed", "device", "depth", "key", "leaves", "ancestors", "errstate",
};
enum { ARRAY_NODE, ARRAY_BASE, ARRAY_VIEWS, ARRAY_SCALAR, ARRAY_SLOTS };
static const char *const array_slot_names[ARRAY_SLOTS] = {"_node", "_base", "_views", "_scalar"};

/* Everything ``bind`` hands over; strong references, held for the life of the process. */
static struct {
    PyTypeObject *node_type, *array_type;
    Py_ssize_t node_offsets[NODE_SLOTS], array_offsets[ARRAY_SLOTS];
    Py_ssize_t recordings_offset, refs_offset; /* _PendingNodes._recordings, _Recording.refs */
    PyTypeObject *recording_type;
    PyObject *trace_module;    /* for STRUCTURE_TABLE_LIMIT and REPLAY_KEY_LIMIT, read when used */
    PyObject *config_module;   /* for max_depth, read when used */
    PyObject *structure_ids;   /* trace._structure_ids */
    PyObject *new_structure_id;
    PyObject *thread_state;    /* trace._thread: .recording */
    PyObject *start_thread;    /* trace._pending.start_thread */
    PyObject *scalar_op;       /* ops.SCALAR */
    PyObject *common_dtypes;   /* record._common_dtypes */
    PyObject *common_result;   /* record._common_result */
    PyObject *bound_depth;     /* record.bound_depth */
    PyObject *mixed_devices;   /* trace.mixed_devices */
    PyObject *host;            /* devices.HOST */
    PyObject *direct_elements; /* tiers.direct_elements */
    PyObject *numpy_scalar;    /* numpy.generic */
    PyObject *scalars;         /* direct.SCALARS: the exact types NumPy's scalar math serves */
    PyObject *writers;         /* direct.WRITES_FIRST_ARGUMENT */
    PyObject *declined;        /* direct.DECLINED */
    PyObject *large_made;      /* direct.large_made */
    PyObject *buffer_op;       /* ops.BUFFER */
    PyObject *pending;         /* trace._pending */
    PyObject *registry_module; /* for backend, read when used */
    PyObject *matmul, *dot;    /* ops.BARRIERS["matmul"], ops.BARRIERS["dot"] */
    PyObject *held_ancestors;  /* trace.held_ancestors, the Python reference: for what C does not take */
    PyObject *package_path;    /* dynfuse's directory: code there is no site of the program's */
    PyObject *materialize_carried; /* execute.materialize_carried */
    PyObject *group_op;            /* trace.GROUP */
    PyObject *python_pending_run; /* trace.pending_run, Python's: for another thread's list */
    PyObject *view_ops;           /* the ops of ops.VIEWS */
    PyObject *take_views;         /* execute.take_views */
    PyObject *operator_into_region_limit; /* record.operator_into_region_limit */
    PyObject *pooled_empty;       /* host_pool.empty */
    PyObject *pool_min_bytes;     /* host_pool.MIN_BYTES */
    PyObject *lock;               /* execute.lock */
    PyObject *replays;            /* replay._replays */
    PyObject *getitem_op, *transpose_op, *reshape_op, *astype_op; /* ops.VIEWS[...], ops.ELEMENTWISE["astype"] */
    PyObject *masked_select_op; /* ops.BARRIERS["masked_select"] */
    PyObject *common_reductions, *common_reduction; /* record._common_reductions, record._common_reduction */
    PyObject *common_casts, *common_cast;           /* record._common_casts, record._common_cast */
    PyObject *str_index, *str_shape, *str_axes, *str_axis, *str_keepdims, *str_dtype;
    PyObject *str_recording, *str_refs, *str_sweep_at, *str_sweep;
    PyObject *str_move_to_end, *str_deep, *str_runs, *str_launch_plan, *str_sweep_own;
    PyObject *str_table_limit, *str_key_limit, *str_max_depth, *str_reference, *str_name, *str_direct, *str_tiers, *str_backend;
    PyObject *str_backends, *str_memory, *str_acquire, *str_release;
    PyObject *zero, *empty; /* 0 and () */
    int bound;
    PyObject *errstate_var;       /* NumPy's error state's context variable (float_errors._state), or None */
    PyObject *float_flags;        /* float_errors.FLAGS: the word kernels report floating-point flags into */
    volatile int64_t *flags_word; /* its memory */
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

/* ---- making and dropping nodes and lazy arrays -------------------------------------------------
   Small-array code makes and drops a Node and a LazyArray for each view or result it handles at
   once (``x[:i]`` is NumPy's view, a leaf node over it, and the lazy array). CPython's generic
   allocation and deallocation of a slotted class (subtype_dealloc walks the class's member
   descriptions each time) cost more than NumPy's view itself. For these two classes, whose layout
   is known once bound (slots only, from object, no finalizer), deallocation does the same steps
   itself (untrack, clear weak references, drop each slot, release the class) and keeps up to
   KEPT_FREE dropped objects of each class, their slots cleared, for the next allocation, as
   CPython's own free lists do for tuples. A subclass keeps CPython's allocation and
   subtype_dealloc, which clears its own slots and then calls these. */

enum { MAX_DROPPED_SLOTS = 24, KEPT_FREE = 256 };
typedef struct {
    PyTypeObject *type; /* the class whose objects are kept (borrowed: S holds it) */
    Py_ssize_t offsets[MAX_DROPPED_SLOTS]; /* each object slot's offset */
    int count, free;
    PyObject *kept[KEPT_FREE]; /* dropped objects: untracked, no references, slots NULL */
} SlotLayout;
static SlotLayout node_layout, array_layout;

/* Reads the layout of ``type`` into ``layout``; 0 where the class is not of the kind handled here. */
static int droppable_layout(PyTypeObject *type, SlotLayout *layout)
{
    unsigned long unusual = 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    unusual |= Py_TPFLAGS_MANAGED_DICT;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    unusual |= Py_TPFLAGS_MANAGED_WEAKREF;
#endif
    if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(type->tp_flags & Py_TPFLAGS_HAVE_GC) || (type->tp_flags & unusual)
        || type->tp_base != &PyBaseObject_Type || type->tp_dictoffset != 0 || type->tp_itemsize != 0
        || type->tp_finalize != NULL || type->tp_del != NULL || type->tp_free != PyObject_GC_Del
        || type->tp_alloc != PyType_GenericAlloc || type->tp_members == NULL)
        return 0;
    layout->count = 0;
    for (PyMemberDef *member = type->tp_members; member->name != NULL; member++) {
        if (member->flags & READONLY)
            continue;
        if (member->type != T_OBJECT_EX || layout->count == MAX_DROPPED_SLOTS)
            return 0;
        layout->offsets[layout->count++] = member->offset;
    }
    layout->type = type;
    return 1;
}

/* A node or lazy array, untracked by the cyclic collector: they hold only each other (a node its
   inputs, a lazy array its node and base: no cycle among them), NumPy's arrays (which the collector
   never sees), and hashable params; a loop of small ops makes two with each op, and walking them at
   every young collection took a tenth of its time. */
static inline PyObject *kept_alloc(SlotLayout *layout, PyTypeObject *type, Py_ssize_t items)
{
    if (type != layout->type || items != 0)
        return PyType_GenericAlloc(type, items);
    if (layout->free > 0)
        return PyObject_Init(layout->kept[--layout->free], type);
    PyObject *made = PyType_GenericAlloc(type, 0);
    if (made != NULL)
        PyObject_GC_UnTrack(made);
    return made;
}

static inline void drop_slots(PyObject *self, SlotLayout *layout)
{
    PyTypeObject *type = Py_TYPE(self);
    if (type->tp_weaklistoffset != 0 && SLOT(self, type->tp_weaklistoffset) != NULL)
        PyObject_ClearWeakRefs(self);
    for (int i = 0; i < layout->count; i++)
        Py_CLEAR(SLOT(self, layout->offsets[i]));
    if (type == layout->type && layout->free < KEPT_FREE)
        layout->kept[layout->free++] = self;
    else
        type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *node_alloc(PyTypeObject *type, Py_ssize_t items)
{
    return kept_alloc(&node_layout, type, items);
}

static PyObject *lazy_array_alloc(PyTypeObject *type, Py_ssize_t items)
{
    return kept_alloc(&array_layout, type, items);
}

/* Untracked before the trashcan, which may put the object aside (in its GC links) and drop it later,
   as CPython's own deallocators do. */
static void node_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, node_dealloc) /* a long chain of nodes dropped at once */
    drop_slots(self, &node_layout);
    Py_TRASHCAN_END
}

static void lazy_array_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_TRASHCAN_BEGIN(self, lazy_array_dealloc)
    drop_slots(self, &array_layout);
    Py_TRASHCAN_END
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

static uint64_t dict_version(PyObject *dict);

/* module_int for a setting read on every recorded op, kept while the module's dict is unchanged
   (its version tag: any assignment to the module's names changes it). -1 with an error set. */
typedef struct {
    uint64_t version;
    Py_ssize_t value;
} KeptInt;

static Py_ssize_t kept_module_int(PyObject *module, PyObject *name, KeptInt *kept)
{
    uint64_t version = dict_version(PyModule_GetDict(module));
    if (version && version == kept->version)
        return kept->value;
    Py_ssize_t value = module_int(module, name);
    if (value == -1 && PyErr_Occurred())
        return -1;
    kept->version = version;
    kept->value = value;
    return value;
}

/* A direct-mapped memo from the identities of up to four objects to a value, in front of a dict
   that answers by equality: a hit builds no key tuple and hashes nothing. An entry holds its parts,
   so no identity it compares is reused while it is kept; a miss asks the dict. */
enum { IDENTITY_PARTS = 4 };
typedef struct {
    PyObject *parts[IDENTITY_PARTS]; /* strong references; NULL: no part there */
    PyObject *value;                 /* a strong reference; NULL in an empty entry */
} IdentityEntry;

static IdentityEntry *identity_entry(IdentityEntry *table, size_t size, PyObject *const *parts)
{
    uint64_t hash = 0;
    for (int i = 0; i < IDENTITY_PARTS; i++)
        hash = (hash ^ (uint64_t)(uintptr_t)parts[i]) * 0x9E3779B97F4A7C15ull;
    return &table[(hash >> 40) % size];
}

/* The value kept for exactly these parts (borrowed); NULL where the entry holds others. */
static PyObject *identity_get(const IdentityEntry *entry, PyObject *const *parts)
{
    for (int i = 0; i < IDENTITY_PARTS; i++)
        if (entry->parts[i] != parts[i])
            return NULL;
    return entry->value;
}

static void identity_put(IdentityEntry *entry, PyObject *const *parts, PyObject *value)
{
    IdentityEntry old = *entry; /* released last: a release may run code that reads the memo */
    for (int i = 0; i < IDENTITY_PARTS; i++)
        entry->parts[i] = Py_XNewRef(parts[i]);
    entry->value = Py_NewRef(value);
    for (int i = 0; i < IDENTITY_PARTS; i++)
        Py_XDECREF(old.parts[i]);
    Py_XDECREF(old.value);
}

/* Structure ids by (op, the inputs' ids) of nodes of at most three inputs and no params, in front of
   trace._structure_ids. An id kept after the table started afresh still names its structure
   alone (ids are never reused): a later lookup may give the structure a new id, which costs a
   replay miss, never a wrong match. */
enum { STRUCTURE_MEMO_SIZE = 1024 };
static IdentityEntry structure_memo[STRUCTURE_MEMO_SIZE];

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

/* Counts kept here rather than in stats' per-thread dicts, as they come once per op: stats adds
   them to its own (``tallies``) and resets them with its own. The GIL orders the increments. */
enum {
    TALLY_DIRECT_OPS, TALLY_DIRECT_LOOPS, TALLY_OPS_RECORDED, TALLY_REPLAYS, TALLY_KERNELS_LAUNCHED, TALLY_FUSED_OPS,
    TALLY_MATERIALIZATIONS, TALLY_STRIP_RUNS, TALLIES
};
static const char *const tally_names[TALLIES] = {
    "direct_ops", "direct_loops", "ops_recorded", "replays", "kernels_launched", "fused_ops", "materializations",
    "strip_runs",
};
static Py_ssize_t tallies[TALLIES];

/* The calling thread's trace._Recording and its list of weak references (swept in place, so the
   same list for the recording's life), kept for the thread that last recorded: thread ids are
   never reused, so another thread never finds them. ``sweep_at`` is the recording's as last read:
   it is read again before sweeping, so a sweep from Python that moved it is seen then. */
static struct {
    uint64_t thread;
    PyObject *recording, *refs;
    Py_ssize_t sweep_at;
} R;

static Py_ssize_t read_sweep_at(void)
{
    PyObject *value = PyObject_GetAttr(R.recording, S.str_sweep_at);
    Py_ssize_t threshold = value == NULL ? -1 : PyLong_AsSsize_t(value);
    Py_XDECREF(value);
    return threshold;
}

/* A weak reference to ``object`` (a new reference), untracked by the cyclic collector: one without a
   callback holds nothing, so it can be in no cycle; the pending list and a base's views keep one per
   op until their next sweep, and walking them, and the full collections their survival brought on,
   took a tenth of a loop of views. */
static PyObject *untracked_ref(PyObject *object)
{
    PyObject *ref = PyWeakref_NewRef(object, NULL);
    if (ref != NULL && Py_IS_TYPE(ref, &_PyWeakref_RefType))
        PyObject_GC_UnTrack(ref);
    return ref;
}

/* What trace._Recording keeps for every node with inputs: a weak reference, and the count. */
static int register_pending(PyObject *node)
{
    uint64_t thread = PyThreadState_GetID(PyThreadState_Get());
    if (R.recording == NULL || R.thread != thread) {
        PyObject *recording = PyObject_GetAttr(S.thread_state, S.str_recording);
        if (recording == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
            if ((recording = PyObject_CallNoArgs(S.start_thread)) == NULL)
                return -1;
        }
        PyObject *refs = PyObject_GetAttr(recording, S.str_refs);
        if (refs == NULL || !PyList_CheckExact(refs)) {
            if (refs != NULL)
                PyErr_SetString(PyExc_TypeError, "_Recording.refs is not a list");
            Py_XDECREF(refs);
            Py_DECREF(recording);
            return -1;
        }
        Py_XSETREF(R.recording, recording);
        Py_XSETREF(R.refs, refs);
        R.thread = thread;
        if ((R.sweep_at = read_sweep_at()) == -1)
            return -1;
    }
    PyObject *ref = untracked_ref(node);
    if (ref == NULL)
        return -1;
    int appended = PyList_Append(R.refs, ref);
    Py_DECREF(ref);
    if (appended < 0)
        return -1;
    tallies[TALLY_OPS_RECORDED]++;
    if (PyList_GET_SIZE(R.refs) < R.sweep_at)
        return 0;
    if ((R.sweep_at = read_sweep_at()) == -1)
        return -1;
    if (PyList_GET_SIZE(R.refs) < R.sweep_at)
        return 0;
    PyObject *swept = PyObject_CallMethodNoArgs(R.recording, S.str_sweep);
    if (swept == NULL)
        return -1;
    Py_DECREF(swept);
    return (R.sweep_at = read_sweep_at()) == -1 ? -1 : 0;
}

/* Write every slot of a node not exposed to NumPy: the first seven values borrowed, the last five
   stolen. */
static void set_node_slots(PyObject *node, PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape,
                           PyObject *dtype, PyObject *buffer, PyObject *device, PyObject *depth, PyObject *key,
                           PyObject *leaves, PyObject *ancestors, PyObject *errstate)
{
    PyObject *values[NODE_SLOTS] = {
        Py_NewRef(op),     Py_NewRef(inputs), Py_NewRef(params), Py_NewRef(shape), Py_NewRef(dtype),
        Py_NewRef(buffer), Py_NewRef(Py_False), Py_NewRef(device), depth, key, leaves, ancestors, errstate,
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

/* float_errors.current(): NumPy's error state in force (a new reference), where NumPy keeps it in a
   context variable; None otherwise (the Python reference then records nodes). */
static PyObject *current_errstate(void)
{
    PyObject *state = NULL;
    if (S.errstate_var == Py_None)
        return Py_NewRef(Py_None);
    return PyContextVar_Get(S.errstate_var, NULL, &state) < 0 ? NULL : (state != NULL ? state : Py_NewRef(Py_None));
}

/* The structure id of a node of ``op`` and ``params`` over ``inputs`` (each with a key): the id of
   its description (op, params, the inputs' ids), through the structure memo where it has no params
   (params made afresh for each node would never be found there). A new reference. */
static PyObject *node_structure(PyObject *op, PyObject *inputs, PyObject *params)
{
    Py_ssize_t count = PyTuple_GET_SIZE(inputs);
    PyObject *parts[IDENTITY_PARTS] = {op, NULL, NULL, NULL};
    IdentityEntry *entry = NULL;
    if (count < IDENTITY_PARTS && params == S.empty) {
        for (Py_ssize_t i = 0; i < count; i++)
            parts[1 + i] = NODE_SLOT(PyTuple_GET_ITEM(inputs, i), KEY);
        entry = identity_entry(structure_memo, STRUCTURE_MEMO_SIZE, parts);
        PyObject *kept = identity_get(entry, parts);
        if (kept != NULL)
            return Py_NewRef(kept);
    }
    PyObject *description = PyTuple_New(2 + count);
    if (description == NULL)
        return NULL;
    PyTuple_SET_ITEM(description, 0, Py_NewRef(op));
    PyTuple_SET_ITEM(description, 1, Py_NewRef(params));
    for (Py_ssize_t i = 0; i < count; i++)
        PyTuple_SET_ITEM(description, 2 + i, Py_NewRef(NODE_SLOT(PyTuple_GET_ITEM(inputs, i), KEY)));
    PyObject *key = intern_structure(description);
    Py_DECREF(description);
    if (key != NULL && entry != NULL)
        identity_put(entry, parts, key);
    return key;
}

/* trace.Node.__init__, on a node whose slots may be unset (fresh) or set (re-initialized). */
/* The profiler's hook (dynfuse.profiler), called with (0, node) for each op recorded, (1, None) for
   each op run at once, (2, node) as a write's pending value is replayed here (replayed_pending) and
   (3, whether it was computed) when that replay is over; NULL while nothing is profiled. While it
   is set, a loop's run is not replayed here (replayed_run) but by Python's execute.materialize,
   which the profiler times. A fault of the hook's is reported, never raised, and an error pending
   when it is called stays pending. */
static PyObject *profile_hook;

static void profiled(int kind, PyObject *subject)
{
    PyObject *type, *error, *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyObject *kind_object = PyLong_FromLong(kind);
    PyObject *result =
        kind_object == NULL ? NULL : PyObject_CallFunctionObjArgs(profile_hook, kind_object, subject, NULL);
    Py_XDECREF(kind_object);
    if (result == NULL)
        PyErr_WriteUnraisable(profile_hook);
    Py_XDECREF(result);
    PyErr_Restore(type, error, traceback);
}

/* An op run at once: counted, and told to the profiler */
static void ran_at_once(void)
{
    tallies[TALLY_DIRECT_OPS]++;
    if (profile_hook != NULL)
        profiled(1, Py_None);
}

static PyObject *set_profile_hook(PyObject *module, PyObject *hook)
{
    Py_XSETREF(profile_hook, hook == Py_None ? NULL : Py_NewRef(hook));
    Py_RETURN_NONE;
}

static int init_node(PyObject *self, PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape,
                     PyObject *dtype, PyObject *known_key)
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
    static KeptInt kept_key_limit;
    Py_ssize_t key_limit = kept_module_int(S.trace_module, S.str_key_limit, &kept_key_limit);
    if (key_limit == -1 && PyErr_Occurred())
        return -1;
    PyObject *key, *leaves, *ancestors;
    if (keyless || leaf_count + ancestor_count > key_limit) {
        key = Py_NewRef(Py_None);
        leaves = Py_NewRef(S.empty);
        ancestors = Py_NewRef(S.empty);
    } else {
        leaves = PyTuple_New(leaf_count);
        ancestors = PyTuple_New(ancestor_count);
        if (leaves == NULL || ancestors == NULL) {
            Py_XDECREF(leaves);
            Py_XDECREF(ancestors);
            return -1;
        }
        Py_ssize_t leaf = 0, ancestor = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *child = PyTuple_GET_ITEM(inputs, i);
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
        key = known_key != NULL ? Py_NewRef(known_key) : node_structure(op, inputs, params);
        if (key == NULL) {
            Py_DECREF(leaves);
            Py_DECREF(ancestors);
            return -1;
        }
    }
    PyObject *depth_object = PyLong_FromLong(depth), *errstate = current_errstate();
    if (leaves == NULL || ancestors == NULL || depth_object == NULL || errstate == NULL) {
        Py_DECREF(key);
        Py_XDECREF(leaves);
        Py_XDECREF(ancestors);
        Py_XDECREF(depth_object);
        Py_XDECREF(errstate);
        return -1;
    }
    set_node_slots(self, op, inputs, params, shape, dtype, Py_None, device, depth_object, key, leaves, ancestors,
                   errstate);
    if (count == 0)
        return 0;
    int registered = register_pending(self);
    if (registered == 0 && profile_hook != NULL)
        profiled(0, self);
    return registered;
}

static PyObject *new_node(PyObject *op, PyObject *inputs, PyObject *params, PyObject *shape, PyObject *dtype)
{
    PyObject *node = S.node_type->tp_alloc(S.node_type, 0);
    if (node != NULL && init_node(node, op, inputs, params, shape, dtype, NULL) < 0)
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
                   Py_NewRef(S.empty), Py_NewRef(S.empty), Py_NewRef(Py_None));
    return node;
}

static int is_weak_scalar(PyObject *value)
{
    if (PyFloat_CheckExact(value) || PyBool_Check(value) || PyComplex_CheckExact(value))
        return 1;
    if (!PyLong_CheckExact(value))
        return 0;
    int overflow;
    long small = PyLong_AsLongAndOverflow(value, &overflow);
    return !overflow && 0 <= small && small <= 127;
}

/* record.bound_depth on a new array (stolen), called only when it has something to do. */
static PyObject *bounded(PyObject *lazy)
{
    long depth = PyLong_AsLong(NODE_SLOT(ARRAY_SLOT(lazy, ARRAY_NODE), DEPTH));
    if (depth == 0) /* a leaf: within any bound (DYNFUSE_MAX_DEPTH is at least 1) */
        return lazy;
    static KeptInt kept_max_depth;
    Py_ssize_t max_depth = kept_module_int(S.config_module, S.str_max_depth, &kept_max_depth);
    if ((max_depth == -1 || depth == -1) && PyErr_Occurred()) {
        Py_DECREF(lazy);
        return NULL;
    }
    if (depth < max_depth)
        return lazy;
    PyObject *result = PyObject_CallOneArg(S.bound_depth, lazy);
    Py_DECREF(lazy);
    return result;
}

static int is_alive(PyObject *ref)
{
    return PyWeakref_GetObject(ref) != Py_None;
}

/* Drop from ``refs`` (a list) the items ``keep`` refuses, in place, in order. -1 with an error set. */
static int compact_refs(PyObject *refs, int (*keep)(PyObject *))
{
    Py_ssize_t count = PyList_GET_SIZE(refs), kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(refs, i);
        if (!keep(item))
            continue;
        if (kept != i) /* the slot's old item is dropped, or moved to an earlier slot */
            PyList_SetItem(refs, kept, Py_NewRef(item));
        kept++;
    }
    return kept < count ? PyList_SetSlice(refs, kept, count, NULL) : 0;
}

/* LazyArray._add_view: a weak reference to ``view`` in ``base._views``; the dead ones go when the
   list reaches a power of two. */
static int add_view(PyObject *base, PyObject *view)
{
    PyObject *ref = untracked_ref(view);
    if (ref == NULL)
        return -1;
    PyObject *refs = ARRAY_SLOT(base, ARRAY_VIEWS);
    if (refs == NULL || refs == Py_None) {
        PyObject *list = PyList_New(1);
        if (list == NULL) {
            Py_DECREF(ref);
            return -1;
        }
        PyList_SET_ITEM(list, 0, ref);
        set_slot(base, S.array_offsets[ARRAY_VIEWS], list);
        return 0;
    }
    if (!PyList_CheckExact(refs)) {
        Py_DECREF(ref);
        PyErr_SetString(PyExc_TypeError, "LazyArray._views is not a list");
        return -1;
    }
    int appended = PyList_Append(refs, ref);
    Py_DECREF(ref);
    if (appended < 0)
        return -1;
    Py_ssize_t count = PyList_GET_SIZE(refs);
    if (count < 8 || (count & (count - 1)) != 0)
        return 0;
    return compact_refs(refs, is_alive);
}

/* LazyArray(node, base, scalar) for ``node`` (stolen), unregistered with its base and unbounded. */
static PyObject *array_over(PyObject *node, PyObject *base, int scalar)
{
    PyObject *lazy = S.array_type->tp_alloc(S.array_type, 0);
    if (lazy == NULL) {
        Py_DECREF(node);
        return NULL;
    }
    set_slot(lazy, S.array_offsets[ARRAY_NODE], node);
    set_slot(lazy, S.array_offsets[ARRAY_BASE], Py_NewRef(base != NULL ? base : Py_None));
    set_slot(lazy, S.array_offsets[ARRAY_VIEWS], Py_NewRef(Py_None));
    set_slot(lazy, S.array_offsets[ARRAY_SCALAR], Py_NewRef(scalar ? Py_True : Py_False));
    return lazy;
}

/* Whether NumPy holds ``array`` (a LazyArray) as a scalar: LazyArray._scalar. */
static inline int is_scalar(PyObject *array)
{
    return ARRAY_SLOT(array, ARRAY_SCALAR) == Py_True;
}

/* Whether a shape tuple holds a zero extent: an empty array. */
static int has_zero_extent(PyObject *shape)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++)
        if (PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i)) == 0)
            return 1;
    return 0;
}

/* A LazyArray over ``node`` (stolen), a view of ``base`` where one is given (registered with it),
   bounded in depth: LazyArray(node, base, scalar), base._add_view, record.bound_depth. */
static PyObject *new_array(PyObject *node, PyObject *base, int scalar)
{
    PyObject *lazy = array_over(node, base, scalar);
    if (lazy == NULL)
        return NULL;
    if (base != NULL && add_view(base, lazy) < 0) {
        Py_DECREF(lazy);
        return NULL;
    }
    return bounded(lazy);
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

/* The shape tuples and structure ids of the host buffers last made leaves, by dtype, shape and
   layout (strides, where not C-contiguous), so a loop over arrays of a few shapes builds and
   interns neither again. An id kept here after the structure table started afresh still names
   this structure alone (ids are never reused): a later lookup may give the structure a new id,
   which costs a replay miss, never a wrong match. */
enum { LEAF_MEMO_SIZE = 512, LEAF_MEMO_NDIM = 4 };
typedef struct {
    PyObject *dtype, *shape, *key; /* strong references; NULL in an empty entry */
    int ndim, contiguous;
    npy_intp dims[LEAF_MEMO_NDIM], strides[LEAF_MEMO_NDIM];
} LeafMemo;
static LeafMemo leaf_memo[LEAF_MEMO_SIZE];

/* The entry where ``values``'s description belongs; NULL for more axes than an entry holds. */
static LeafMemo *leaf_memo_entry(PyArrayObject *values)
{
    int ndim = PyArray_NDIM(values);
    if (ndim > LEAF_MEMO_NDIM)
        return NULL;
    size_t hash = (size_t)PyArray_DESCR(values) >> 4;
    int contiguous = PyArray_IS_C_CONTIGUOUS(values);
    for (int axis = 0; axis < ndim; axis++) {
        hash = hash * 1000003u ^ (size_t)PyArray_DIM(values, axis);
        if (!contiguous) /* a view and its contiguous copy apart: a statement makes both */
            hash = hash * 1000003u ^ (size_t)PyArray_STRIDE(values, axis);
    }
    return &leaf_memo[(hash ^ (hash >> 16)) % LEAF_MEMO_SIZE];
}

/* trace.Node.leaf(array, exposed=False) for a host ndarray: its key is the structure id of
   trace.buffer_key(array). */
static PyObject *host_leaf(PyObject *array)
{
    PyArrayObject *values = (PyArrayObject *)array;
    int ndim = PyArray_NDIM(values), contiguous = PyArray_IS_C_CONTIGUOUS(values);
    PyObject *dtype = (PyObject *)PyArray_DESCR(values);
    LeafMemo *memo = leaf_memo_entry(values);
    int found = memo != NULL && memo->dtype == dtype && memo->ndim == ndim && memo->contiguous == contiguous;
    for (int axis = 0; found && axis < ndim; axis++)
        found = memo->dims[axis] == PyArray_DIM(values, axis)
                && (contiguous || memo->strides[axis] == PyArray_STRIDE(values, axis));
    PyObject *shape, *key, *node;
    if (found) {
        shape = Py_NewRef(memo->shape);
        key = Py_NewRef(memo->key);
    } else {
        PyObject *layout = NULL, *description = NULL;
        key = NULL;
        if ((shape = PyTuple_New(ndim)) == NULL)
            return NULL;
        for (int axis = 0; axis < ndim; axis++) {
            PyObject *extent = PyLong_FromSsize_t(PyArray_DIM(values, axis));
            if (extent == NULL)
                goto built;
            PyTuple_SET_ITEM(shape, axis, extent);
        }
        if (contiguous) {
            layout = Py_NewRef(Py_None);
        } else {
            if ((layout = PyTuple_New(ndim)) == NULL)
                goto built;
            for (int axis = 0; axis < ndim; axis++) {
                PyObject *stride = PyLong_FromSsize_t(PyArray_STRIDE(values, axis));
                if (stride == NULL)
                    goto built;
                PyTuple_SET_ITEM(layout, axis, stride);
            }
        }
        if ((description = PyTuple_Pack(3, dtype, shape, layout)) != NULL)
            key = intern_structure(description);
    built:
        Py_XDECREF(description);
        Py_XDECREF(layout);
        if (key == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        if (memo != NULL) {
            Py_XSETREF(memo->dtype, Py_NewRef(dtype));
            Py_XSETREF(memo->shape, Py_NewRef(shape));
            Py_XSETREF(memo->key, Py_NewRef(key));
            memo->ndim = ndim;
            memo->contiguous = contiguous;
            for (int axis = 0; axis < ndim; axis++) {
                memo->dims[axis] = PyArray_DIM(values, axis);
                memo->strides[axis] = PyArray_STRIDE(values, axis);
            }
        }
    }
    if ((node = S.node_type->tp_alloc(S.node_type, 0)) == NULL) {
        Py_DECREF(shape);
        Py_DECREF(key);
        return NULL;
    }
    set_node_slots(node, S.buffer_op, S.empty, S.empty, shape, dtype, array, S.host, Py_NewRef(S.zero), key,
                   Py_NewRef(S.empty), Py_NewRef(S.empty), Py_NewRef(Py_None));
    Py_DECREF(shape);
    return node;
}

/* A lazy array over a leaf of the host ndarray ``made`` (borrowed); ``exposed`` where code outside
   dynfuse may hold its memory. */
static PyObject *leaf_array(PyObject *made, int exposed)
{
    PyObject *node = host_leaf(made);
    if (node == NULL)
        return NULL;
    if (exposed)
        set_slot(node, S.node_offsets[EXPOSED], Py_NewRef(Py_True));
    return new_array(node, NULL, 0);
}

/* direct.result: NumPy's fresh result (stolen) as a lazy array over a leaf, a scalar as it is. */
static PyObject *direct_result(PyObject *made)
{
    ran_at_once();
    if (!PyArray_Check(made))
        return made;
    PyObject *lazy = leaf_array(made, 0);
    Py_DECREF(made);
    return lazy;
}

/* direct.view(array, viewed, keeps_scalar): a lazy array over a leaf of ``viewed``, a NumPy view of the
   array's buffer, with the array's base as its base; a scalar's 0-d view is a scalar where
   ``keeps_scalar`` (a method's: ``s.T``), an array where not (NumPy's ``s[...]``). */
static PyObject *direct_view(PyObject *array, PyObject *viewed, int keeps_scalar)
{
    PyObject *base = ARRAY_SLOT(array, ARRAY_BASE);
    if (base == NULL || base == Py_None)
        base = array;
    ran_at_once();
    PyObject *node = host_leaf(viewed);
    /* Not registered with its base: NumPy's view holds the base's buffer, which viewed_by_numpy reads */
    int scalar = keeps_scalar && is_scalar(array) && PyArray_NDIM((PyArrayObject *)viewed) == 0;
    return node == NULL ? NULL : array_over(node, base, scalar);
}

/* direct.viewed_by_numpy(node): whether a NumPy array besides the node's own may see its buffer's
   memory. A NumPy view holds the first array down its base chain that owns its memory (or whose base
   is no ndarray), so while the buffer is held by its node alone, and each ndarray down its chain by
   the one above alone, no view of that memory exists. */
static PyObject *viewed_by_numpy(PyObject *module, PyObject *node)
{
    BIND_CHECK();
    if (!PyObject_TypeCheck(node, S.node_type)) {
        PyErr_SetString(PyExc_TypeError, "viewed_by_numpy takes a Node");
        return NULL;
    }
    PyObject *buffer = NODE_SLOT(node, BUFFER);
    if (buffer == NULL || !PyArray_Check(buffer))
        return Py_NewRef(Py_False);
    for (PyObject *array = buffer;; array = PyArray_BASE((PyArrayObject *)array)) {
        if (Py_REFCNT(array) > 1)
            return Py_NewRef(Py_True);
        PyObject *base = PyArray_BASE((PyArrayObject *)array);
        if (PyArray_CHKFLAGS((PyArrayObject *)array, NPY_ARRAY_OWNDATA) || base == NULL || !PyArray_Check(base))
            return Py_NewRef(Py_False);
    }
}

/* A dict's version, which changes with every write to it: CPython's ma_version_tag (gone from
   3.14, where 0 says there is none and the settings are looked up by name each time). */
static uint64_t dict_version(PyObject *dict)
{
#if PY_VERSION_HEX < 0x030E0000
    _Py_COMP_DIAG_PUSH
    _Py_COMP_DIAG_IGNORE_DEPR_DECLS
    return ((PyDictObject *)dict)->ma_version_tag;
    _Py_COMP_DIAG_POP
#else
    return 0;
#endif
}

/* tiers.direct_elements(), kept: it is read on every element access, so it is kept while the
   settings it depends on (config.direct, config.tiers, registry.backend) are the same objects: a
   backend's Target is fixed once the backend is made. While neither module's dict was written to
   since, they are not even looked up. */
static struct {
    PyObject *config, *registry; /* the modules' dicts, which live as long as the bound modules */
    PyObject *seen[3];           /* strong references, so an identity is never reused while kept */
    uint64_t versions[2];
    Py_ssize_t kept;             /* -1: not read yet */
} limit_memo = {.kept = -1};

/* direct_limit, where the settings' dicts changed since: -1 with an error set. */
static Py_ssize_t read_direct_limit(void)
{
    if (limit_memo.config == NULL) {
        limit_memo.config = PyModule_GetDict(S.config_module);
        limit_memo.registry = PyModule_GetDict(S.registry_module);
    }
    uint64_t versions[2] = {dict_version(limit_memo.config), dict_version(limit_memo.registry)};
    PyObject *now[3] = { /* borrowed */
        PyDict_GetItemWithError(limit_memo.config, S.str_direct),
        PyDict_GetItemWithError(limit_memo.config, S.str_tiers),
        PyDict_GetItemWithError(limit_memo.registry, S.str_backend),
    };
    int same = limit_memo.kept >= 0;
    for (int i = 0; i < 3; i++)
        same &= now[i] != NULL && now[i] == limit_memo.seen[i];
    if (!same) {
        if (PyErr_Occurred())
            return -1;
        PyObject *limit = PyObject_CallNoArgs(S.direct_elements); /* raises where a setting is missing */
        Py_ssize_t value = limit == NULL ? -1 : PyLong_AsSsize_t(limit);
        Py_XDECREF(limit);
        if (value == -1)
            return -1;
        for (int i = 0; i < 3; i++)
            Py_XSETREF(limit_memo.seen[i], Py_XNewRef(now[i]));
        limit_memo.kept = value;
    }
    limit_memo.versions[0] = versions[0];
    limit_memo.versions[1] = versions[1];
    return limit_memo.kept;
}

/* tiers.direct_elements(); -1 with an error set. */
static inline Py_ssize_t direct_limit(void)
{
    if (limit_memo.kept >= 0) {
        uint64_t config = dict_version(limit_memo.config);
        if (config != 0 && config == limit_memo.versions[0] && dict_version(limit_memo.registry) == limit_memo.versions[1])
            return limit_memo.kept;
    }
    return read_direct_limit();
}

/* Whether the node holds a buffer in host memory (trace.Node with no inputs, on devices.HOST). */
static inline int computed_on_host(PyObject *node)
{
    PyObject *inputs = NODE_SLOT(node, INPUTS);
    return inputs != NULL && PyTuple_CheckExact(inputs) && PyTuple_GET_SIZE(inputs) == 0
           && NODE_SLOT(node, DEVICE) == S.host && NODE_SLOT(node, BUFFER) != NULL;
}

/* The node (borrowed) of a lazy array that holds a host buffer; NULL for anything else. */
static inline PyObject *host_node(PyObject *value)
{
    if (!Py_IS_TYPE(value, S.array_type))
        return NULL;
    PyObject *node = ARRAY_SLOT(value, ARRAY_NODE);
    return node != NULL && computed_on_host(node) ? node : NULL;
}

/* host_node, where it has fewer elements than direct execution takes; NULL otherwise, with an
   error set only where reading the limit failed. */
static PyObject *small_host_node(PyObject *value)
{
    PyObject *node = host_node(value);
    if (node == NULL)
        return NULL;
    Py_ssize_t size = shape_size(NODE_SLOT(node, SHAPE)), limit = size < 0 ? -1 : direct_limit();
    return limit >= 0 && size < limit ? node : NULL;
}

/* op.reference (a new reference): ops are immutable, so what an op was last seen with is kept, by
   the op's address, holding the op so that address is not reused while kept. */
static PyObject *op_reference(PyObject *op)
{
    enum { KEPT = 64 };
    static PyObject *ops[KEPT], *references[KEPT];
    size_t slot = ((size_t)op >> 4) % KEPT;
    if (ops[slot] == op)
        return Py_NewRef(references[slot]);
    PyObject *reference = PyObject_GetAttr(op, S.str_reference);
    if (reference != NULL) {
        Py_XSETREF(ops[slot], Py_NewRef(op));
        Py_XSETREF(references[slot], Py_NewRef(reference));
    }
    return reference;
}

/* ---- NumPy's own loop, without NumPy's dispatch --------------------------------------------------

   On the small arrays direct execution takes, a ufunc call is mostly NumPy's dispatch (about
   0.2 us, 0.35 with a Python scalar to convert), not its loop. Where NumPy takes its trivial path
   (one call of the loop: operands aligned, of the dtypes the loop takes, C-contiguous or 1-D, of one
   shape, scalars and 0-d arrays at stride 0; one output, fresh or not overlapping an input but as
   the same elements), the loop NumPy resolves for those operand kinds
   (``ufunc._resolve_dtypes_and_context`` and ``ufunc._get_strided_loop``, asked once per ufunc and
   kinds) is called here with the strides NumPy passes: NumPy's code on the same memory, so NumPy's
   result bit for bit. A floating-point flag raised, or an error, hands the call back to NumPy
   (a given output restored first), which computes it again and warns or raises as its error state
   says; so does a Python scalar NumPy would convert with a check (an int out of the dtype's range,
   a float beyond float32's). */

typedef int (*StridedLoop)(void *context, char *const *data, const npy_intp *count, const npy_intp *strides,
                           void *auxdata);
typedef struct { /* the capsule NumPy names CALL_INFO_NAME */
    StridedLoop loop;
    void *context, *auxdata;
    npy_bool requires_pyapi, no_floatingpoint_errors;
} UfuncCallInfo;
static const char CALL_INFO_NAME[] = "numpy_1.24_ufunc_call_info";

/* An operand's kind: a dtype's number, or a Python scalar NumPy converts to the loop's dtype */
enum { KIND_PYTHON_FLOAT = 1000, KIND_PYTHON_INT, KIND_PYTHON_COMPLEX };

/* A Python float, int or complex: its KIND_PYTHON_*; -1 for anything else */
static int python_scalar_kind(PyObject *value)
{
    return PyFloat_CheckExact(value)     ? KIND_PYTHON_FLOAT
           : PyLong_CheckExact(value)    ? KIND_PYTHON_INT
           : PyComplex_CheckExact(value) ? KIND_PYTHON_COMPLEX
                                         : -1;
}
/* How an operand is strided in the loop's call; STRIDE_ROWS: an N-d array NumPy's iterator would
   walk (strided, but in C order), which is walked here a row at a time */
enum { STRIDE_ZERO, STRIDE_ITEM, STRIDE_OTHER, STRIDE_ROWS };
enum {
    LOOP_MEMO_SIZE = 256,
    FLOAT_FLAGS = FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID,
    KEPT_OUTPUT_BYTES = 4096, /* a given output this large at most is kept, to restore on a hand-back */
};
typedef struct {
    PyObject *ufunc; /* strong reference; NULL in an empty entry */
    int reduction;   /* the loop of ufunc.reduce: called on (accumulator, input, accumulator) */
    int nin, kinds[2], strides[3]; /* strides: the inputs' and the output's */
    PyObject *capsule;             /* strong reference; NULL: NumPy's dispatch runs such calls */
    UfuncCallInfo *info;           /* the capsule's */
    PyArray_Descr *descrs[3];      /* strong references: the loop's dtypes, inputs then output */
} LoopMemo;
static LoopMemo loop_memo[LOOP_MEMO_SIZE];
static PyTypeObject *ufunc_type;   /* numpy.ufunc, found when first asked */
static PyObject *walk_independent; /* ops.WALK_INDEPENDENT_UFUNCS, with it: whose loops may walk rows */

/* The floating-point flags FLOAT_FLAGS names, cleared and read. On x86-64 both units are read
   (NumPy's loops compute in SSE, but the C library raises overflow and underflow in the x87 unit)
   and written only where a flag is set: fenv's calls save and load the whole x87 environment,
   which costs more than a small loop. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <xmmintrin.h>
static inline unsigned int x87_status(void)
{
    unsigned short status;
    __asm__ __volatile__("fnstsw %0" : "=am"(status));
    return status;
}
static inline void clear_float_flags(void)
{
    if (x87_status() & FLOAT_FLAGS)
        __asm__ __volatile__("fnclex");
    unsigned int control = _mm_getcsr();
    if (control & FLOAT_FLAGS)
        _mm_setcsr(control & ~(unsigned int)FLOAT_FLAGS);
}
/* The flags raised, as fenv's FE_* bits: both units' status bits are those bits */
static inline int float_status(void)
{
    return (int)((x87_status() | _mm_getcsr()) & FLOAT_FLAGS);
}
#else
static inline void clear_float_flags(void)
{
    feclearexcept(FLOAT_FLAGS);
}
static inline int float_status(void)
{
    return fetestexcept(FLOAT_FLAGS);
}
#endif
static inline int float_flags_raised(void)
{
    return float_status() != 0;
}

static int plain_type(int type_num)
{
    return (type_num <= NPY_CDOUBLE && type_num != NPY_LONGDOUBLE) || type_num == NPY_HALF;
}

/* The loop NumPy resolves for a ufunc of one output and these operand kinds, in ``memo``; no
   capsule where NumPy's dispatch must run (a gufunc, several outputs, no loop, a loop that needs
   Python). Only a failed allocation is an error. */
static int resolve_loop(LoopMemo *memo, PyObject *ufunc, int reduction, int nin, const int *kinds, const int *strides)
{
    Py_CLEAR(memo->capsule);
    for (int i = 0; i < 3; i++)
        Py_CLEAR(memo->descrs[i]);
    Py_XSETREF(memo->ufunc, Py_NewRef(ufunc));
    memo->reduction = reduction;
    memo->nin = nin;
    memo->info = NULL;
    for (int i = 0; i <= nin; i++) {
        if (i < nin)
            memo->kinds[i] = kinds[i];
        memo->strides[i] = strides[i];
    }
    PyObject *nout = PyObject_GetAttrString(ufunc, "nout"), *signature = PyObject_GetAttrString(ufunc, "signature");
    PyObject *dtypes = PyTuple_New(nin + 1), *resolved = NULL, *fixed = NULL, *keywords = NULL, *filled = NULL;
    if (nout == NULL || signature == NULL || dtypes == NULL || PyLong_AsLong(nout) != 1 || signature != Py_None)
        goto done;
    for (int i = 0; i < nin; i++) {
        /* A reduction's dtypes are NumPy's (None, input, None): the accumulator's are resolved */
        PyObject *kind = reduction && i == 0             ? Py_NewRef(Py_None)
                         : kinds[i] == KIND_PYTHON_FLOAT ? Py_NewRef((PyObject *)&PyFloat_Type)
                         : kinds[i] == KIND_PYTHON_INT   ? Py_NewRef((PyObject *)&PyLong_Type)
                         : kinds[i] == KIND_PYTHON_COMPLEX ? Py_NewRef((PyObject *)&PyComplex_Type)
                                                         : (PyObject *)PyArray_DescrFromType(kinds[i]);
        if (kind == NULL)
            goto done;
        PyTuple_SET_ITEM(dtypes, i, kind);
    }
    PyTuple_SET_ITEM(dtypes, nin, Py_NewRef(Py_None));
    PyObject *resolve = PyObject_GetAttrString(ufunc, "_resolve_dtypes_and_context");
    PyObject *resolve_arguments = resolve == NULL ? NULL : PyTuple_Pack(1, dtypes);
    PyObject *resolve_keywords = reduction ? Py_BuildValue("{s:O}", "reduction", Py_True) : NULL;
    if (resolve_arguments != NULL && (resolve_keywords != NULL || !reduction))
        resolved = PyObject_Call(resolve, resolve_arguments, resolve_keywords);
    Py_XDECREF(resolve);
    Py_XDECREF(resolve_arguments);
    Py_XDECREF(resolve_keywords);
    if (resolved == NULL || !PyTuple_CheckExact(resolved) || PyTuple_GET_SIZE(resolved) != 2)
        goto done;
    PyObject *loop_dtypes = PyTuple_GET_ITEM(resolved, 0), *capsule = PyTuple_GET_ITEM(resolved, 1);
    if (!PyTuple_CheckExact(loop_dtypes) || PyTuple_GET_SIZE(loop_dtypes) != nin + 1
        || !PyCapsule_IsValid(capsule, CALL_INFO_NAME) || (fixed = PyTuple_New(nin + 1)) == NULL)
        goto done;
    for (int i = 0; i <= nin; i++) {
        PyObject *descr = PyTuple_GET_ITEM(loop_dtypes, i);
        if (!PyArray_DescrCheck(descr) || !plain_type(((PyArray_Descr *)descr)->type_num)
            || !PyArray_ISNBO(((PyArray_Descr *)descr)->byteorder))
            goto done;
        npy_intp size = PyDataType_ELSIZE((PyArray_Descr *)descr);
        npy_intp stride = strides[i] == STRIDE_ITEM ? size : strides[i] == STRIDE_ZERO ? 0 : NPY_MAX_INTP;
        PyObject *value = PyLong_FromSsize_t(stride);
        if (value == NULL)
            goto done;
        PyTuple_SET_ITEM(fixed, i, value);
    }
    if ((keywords = Py_BuildValue("{s:O}", "fixed_strides", fixed)) == NULL)
        goto done;
    PyObject *get_loop = PyObject_GetAttrString(ufunc, "_get_strided_loop");
    PyObject *call = get_loop == NULL ? NULL : PyTuple_Pack(1, capsule);
    filled = call == NULL ? NULL : PyObject_Call(get_loop, call, keywords);
    Py_XDECREF(get_loop);
    Py_XDECREF(call);
    if (filled == NULL)
        goto done;
    UfuncCallInfo *info = PyCapsule_GetPointer(capsule, CALL_INFO_NAME);
    if (info == NULL || info->loop == NULL || info->requires_pyapi)
        goto done;
    memo->capsule = Py_NewRef(capsule);
    memo->info = info;
    for (int i = 0; i <= nin; i++)
        memo->descrs[i] = (PyArray_Descr *)Py_NewRef(PyTuple_GET_ITEM(loop_dtypes, i));
done:
    Py_XDECREF(nout);
    Py_XDECREF(signature);
    Py_XDECREF(dtypes);
    Py_XDECREF(resolved);
    Py_XDECREF(fixed);
    Py_XDECREF(keywords);
    Py_XDECREF(filled);
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            return -1;
        PyErr_Clear(); /* NumPy's dispatch runs such calls, and raises what it raises */
    }
    return 0;
}

/* The memo entry of a ufunc and operand kinds, resolved where it was not; NULL with an error set
   only where resolving failed to allocate. */
static LoopMemo *loop_for(PyObject *ufunc, int reduction, int nin, const int *kinds, const int *strides)
{
    size_t hash = (size_t)ufunc >> 4 ^ (size_t)reduction;
    for (int i = 0; i <= nin; i++)
        hash = hash * 1000003u ^ (size_t)((i < nin ? kinds[i] : 0) * 3 + strides[i]);
    LoopMemo *memo = &loop_memo[(hash ^ (hash >> 11)) % LOOP_MEMO_SIZE];
    int found = memo->ufunc == ufunc && memo->reduction == reduction && memo->nin == nin;
    for (int i = 0; found && i <= nin; i++)
        found = (i == nin || memo->kinds[i] == kinds[i]) && memo->strides[i] == strides[i];
    if (!found && resolve_loop(memo, ufunc, reduction, nin, kinds, strides) < 0)
        return NULL;
    return memo;
}

typedef union {
    npy_int8 int8;
    npy_int16 int16;
    npy_int32 int32;
    npy_int64 int64;
    float single;
    double real;
    float complex_single[2];
    double complex_real[2];
    char bytes[16];
} ScalarValue;

/* A Python float, int or complex as NumPy converts it to the loop's dtype, in ``into``: 1; 0 where
   NumPy's conversion would check it (an int beyond the dtype, a float beyond float32) or the dtype
   is one this does not write. */
static int python_scalar_as(PyObject *value, PyArray_Descr *descr, ScalarValue *into)
{
    int type_num = descr->type_num;
    double real;
    if (PyComplex_CheckExact(value)) {
        Py_complex number = PyComplex_AsCComplex(value);
        if (type_num == NPY_CDOUBLE) {
            into->complex_real[0] = number.real, into->complex_real[1] = number.imag;
            return 1;
        }
        int beyond = (isfinite(number.real) && fabs(number.real) > FLT_MAX)
                     || (isfinite(number.imag) && fabs(number.imag) > FLT_MAX);
        if (type_num != NPY_CFLOAT || beyond)
            return 0;
        into->complex_single[0] = (float)number.real, into->complex_single[1] = (float)number.imag;
        return 1;
    }
    if (PyFloat_CheckExact(value)) {
        real = PyFloat_AS_DOUBLE(value);
        if ((type_num == NPY_FLOAT || type_num == NPY_CFLOAT) && isfinite(real) && fabs(real) > FLT_MAX)
            return 0;
    } else {
        int overflow;
        long long whole = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (whole == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        if (PyTypeNum_ISINTEGER(type_num)) {
            int bits = (int)PyDataType_ELSIZE(descr) * 8;
            if (PyTypeNum_ISUNSIGNED(type_num) ? whole < 0 || (bits < 64 && whole >> bits != 0)
                                                : bits < 64 && (whole < -(1LL << (bits - 1)) || whole >= 1LL << (bits - 1)))
                return 0;
            switch (bits) {
            case 8: into->int8 = (npy_int8)whole; return 1;
            case 16: into->int16 = (npy_int16)whole; return 1;
            case 32: into->int32 = (npy_int32)whole; return 1;
            default: into->int64 = (npy_int64)whole; return 1;
            }
        }
        long long exact = type_num == NPY_FLOAT || type_num == NPY_CFLOAT ? 1LL << 24 : 1LL << 53;
        if (whole > exact || whole < -exact)
            return 0;
        real = (double)whole;
    }
    switch (type_num) {
    case NPY_DOUBLE: into->real = real; return 1;
    case NPY_FLOAT: into->single = (float)real; return 1;
    case NPY_CDOUBLE: into->complex_real[0] = real; into->complex_real[1] = 0.0; return 1;
    case NPY_CFLOAT: into->complex_single[0] = (float)real; into->complex_single[1] = 0.0f; return 1;
    default: return 0;
    }
}

/* Whether NumPy's loops read the array's elements as they are: a plain dtype, in the machine's
   byte order, aligned. */
static inline int plain_array(PyArrayObject *array)
{
    return plain_type(PyArray_TYPE(array)) && PyArray_ISNOTSWAPPED(array) && PyArray_ISALIGNED(array);
}

/* An ndarray's stride kind in the trivial loop, and the operation's shape and order it agrees with
   (``shaped``, the first array of one or more axes; ``order``, the N-d arrays' contiguity flags):
   -1 where NumPy would not take its trivial path with C order. */
static int trivial_stride(PyArrayObject *array, PyArrayObject **shaped, int *order)
{
    int ndim = PyArray_NDIM(array);
    if (!plain_array(array))
        return -1;
    if (ndim == 0)
        return STRIDE_ZERO;
    if (*shaped == NULL)
        *shaped = array;
    else if (ndim != PyArray_NDIM(*shaped) || !PyArray_CompareLists(PyArray_DIMS(*shaped), PyArray_DIMS(array), ndim))
        return -1;
    if (ndim == 1)
        return PyArray_STRIDE(array, 0) == PyArray_ITEMSIZE(array) ? STRIDE_ITEM : STRIDE_OTHER;
    int flags = PyArray_FLAGS(array) & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_F_CONTIGUOUS);
    if ((flags & NPY_ARRAY_C_CONTIGUOUS) && (*order == 0 || *order == flags)) {
        *order = flags;
        return STRIDE_ITEM;
    }
    /* Walked by NumPy's iterator, whose output is C-ordered where every operand's strides are:
       positive and decreasing along the axes of more than one element */
    npy_intp outer = NPY_MAX_INTP;
    for (int axis = 0; axis < ndim; axis++) {
        npy_intp stride = PyArray_STRIDE(array, axis);
        if (PyArray_DIM(array, axis) == 1)
            continue;
        if (stride <= 0 || stride >= outer)
            return -1;
        outer = stride;
    }
    return STRIDE_ROWS;
}

/* Whether ``array`` is one element of one or more axes, broadcast against ``other``, an array of
   more elements and at least as many axes: NumPy's result has the other's shape. */
static int one_element_against(PyArrayObject *array, PyObject *other)
{
    return PyArray_NDIM(array) > 0 && PyArray_SIZE(array) == 1 && PyArray_CheckExact(other)
           && PyArray_SIZE((PyArrayObject *)other) != 1 && PyArray_NDIM((PyArrayObject *)other) >= PyArray_NDIM(array);
}

/* The bytes an array's elements span, from its first. */
static npy_intp span(PyArrayObject *array)
{
    npy_intp size = PyArray_SIZE(array), step = PyArray_NDIM(array) == 1 ? PyArray_STRIDE(array, 0) : PyArray_ITEMSIZE(array);
    return size == 0 ? 0 : (size - 1) * (step < 0 ? -step : step) + PyArray_ITEMSIZE(array);
}

/* Whether NumPy's trivial path would write ``out`` while reading ``input``: they share no memory,
   or are the same elements (one element broadcast over more is read at each). */
static int reads_before_writes(PyArrayObject *input, PyArrayObject *out)
{
    char *first = PyArray_BYTES(input), *target = PyArray_BYTES(out);
    if (PyArray_NDIM(input) == 0 || (PyArray_SIZE(input) == 1 && PyArray_SIZE(out) != 1))
        return first + PyArray_ITEMSIZE(input) <= target || target + span(out) <= first;
    if (first == target && PyArray_NDIM(input) == PyArray_NDIM(out)
        && (PyArray_NDIM(out) > 1 || PyArray_STRIDE(input, 0) == PyArray_STRIDE(out, 0)))
        return 1;
    if (PyArray_NDIM(input) == 1 && PyArray_STRIDE(input, 0) < 0)
        first -= span(input) - PyArray_ITEMSIZE(input);
    if (PyArray_NDIM(out) == 1 && PyArray_STRIDE(out, 0) < 0)
        target -= span(out) - PyArray_ITEMSIZE(out);
    return first + span(input) <= target || target + span(out) <= first;
}

/* The loop called on each row of the last axis, in C order: each array operand by its own strides
   (a 0-d one or a scalar stays put), into the fresh C-contiguous ``written``. Where every element's
   value is the loop's exact or correctly rounded one (ops.WALK_INDEPENDENT_UFUNCS), NumPy's
   iterator, however it walks the operands, computes the same. Nonzero where the loop failed. */
static int walk_rows(UfuncCallInfo *info, int nin, PyObject *const *values, char *const *data, PyArrayObject *written)
{
    int ndim = PyArray_NDIM(written);
    npy_intp count = PyArray_DIM(written, ndim - 1), rows = PyArray_SIZE(written) / count, index[NPY_MAXDIMS] = {0};
    npy_intp steps[3];
    const npy_intp *strides[3];
    static const npy_intp still[NPY_MAXDIMS]; /* a scalar's strides: all zero */
    for (int i = 0; i <= nin; i++) {
        PyArrayObject *array = i == nin ? written : PyArray_CheckExact(values[i]) ? (PyArrayObject *)values[i] : NULL;
        strides[i] = array == NULL || PyArray_SIZE(array) == 1 ? still : PyArray_STRIDES(array);
        steps[i] = strides[i][ndim - 1];
    }
    char *row[3];
    for (npy_intp done = 0; done < rows; done++) {
        for (int i = 0; i <= nin; i++) {
            row[i] = data[i];
            for (int axis = 0; axis < ndim - 1; axis++)
                row[i] += index[axis] * strides[i][axis];
        }
        if (info->loop(info->context, row, &count, steps, info->auxdata) != 0)
            return 1;
        for (int axis = ndim - 2; axis >= 0 && ++index[axis] == PyArray_DIM(written, axis); axis--)
            index[axis] = 0;
    }
    return 0;
}

/* The type number of a NumPy scalar of the types scalar code reads most (an element of a float64,
   float32, int64 or bool array), known from its exact class: PyArray_DescrFromScalar finds it by a
   longer search. -1 for any other value. */
static inline int common_scalar_kind(PyObject *value)
{
    PyTypeObject *type = Py_TYPE(value);
    return type == &PyDoubleArrType_Type  ? NPY_DOUBLE
           : type == &PyFloatArrType_Type ? NPY_FLOAT
           : type == &PyLongArrType_Type  ? NPY_LONG
           : type == &PyBoolArrType_Type  ? NPY_BOOL
                                          : -1;
}

/* Whether numpy.ufunc and ops.WALK_INDEPENDENT_UFUNCS are at hand (found when first asked):
   without them NumPy's dispatch runs every call. */
static int loops_ready(void)
{
    static int ready; /* 1: found; -1: not found */
    if (ready == 0) {
        PyObject *numpy = PyImport_ImportModule("numpy"), *ops = PyImport_ImportModule("dynfuse.ops");
        walk_independent = ops == NULL ? NULL : PyObject_GetAttrString(ops, "WALK_INDEPENDENT_UFUNCS");
        ufunc_type = numpy == NULL ? NULL : (PyTypeObject *)PyObject_GetAttrString(numpy, "ufunc");
        Py_XDECREF(numpy);
        Py_XDECREF(ops);
        ready = walk_independent != NULL && ufunc_type != NULL ? 1 : -1;
        PyErr_Clear();
    }
    return ready > 0;
}

/* ``ufunc(*values, out=out)`` (out NULL: a fresh array) by NumPy's loop called here; values are
   ndarrays and Python and NumPy scalars. The result (a new reference); NULL without an error where
   NumPy's dispatch must run it, ``out`` as it was; NULL with an error only where memory ran out. */
static PyObject *loop_now(PyObject *ufunc, PyObject *const *values, Py_ssize_t count, PyArrayObject *out)
{
    if (!loops_ready() || !Py_IS_TYPE(ufunc, ufunc_type) || count < 1 || count > 2)
        return NULL;
    int nin = (int)count, kinds[2], strides[3] = {0, 0, STRIDE_ITEM}, order = 0;
    PyArrayObject *shaped = NULL; /* the first operand of one or more axes: the operation's shape */
    if (out != NULL /* contiguous, to be kept whole */
        && (!PyArray_CheckExact(out) || PyArray_NDIM(out) == 0 || !PyArray_ISWRITEABLE(out)
            || PyArray_NBYTES(out) > KEPT_OUTPUT_BYTES || trivial_stride(out, &shaped, &order) != STRIDE_ITEM))
        return NULL;
    for (int i = 0; i < nin; i++) {
        PyObject *value = values[i];
        if (PyArray_CheckExact(value)) {
            kinds[i] = PyArray_TYPE((PyArrayObject *)value);
            /* One element against an array of as many axes or more (``row + bias[i]``, bias of
               (n, 1)): read as a 0-d array is, the result of the other's shape */
            if (nin == 2 && one_element_against((PyArrayObject *)value, values[1 - i])) {
                if (!plain_array((PyArrayObject *)value))
                    return NULL;
                strides[i] = STRIDE_ZERO;
            } else if ((strides[i] = trivial_stride((PyArrayObject *)value, &shaped, &order)) < 0) {
                return NULL;
            }
            if (out != NULL && !reads_before_writes((PyArrayObject *)value, out))
                return NULL;
        } else if ((kinds[i] = python_scalar_kind(value)) >= 0) {
            strides[i] = STRIDE_ZERO;
        } else if ((kinds[i] = common_scalar_kind(value)) >= 0) {
            strides[i] = STRIDE_ZERO;
        } else if (PyArray_IsScalar(value, Generic)) {
            PyArray_Descr *descr = PyArray_DescrFromScalar(value);
            if (descr == NULL)
                return NULL;
            kinds[i] = descr->type_num;
            int plain = plain_type(descr->type_num) && PyArray_ISNBO(descr->byteorder);
            Py_DECREF(descr);
            if (!plain)
                return NULL;
            strides[i] = STRIDE_ZERO;
        } else {
            return NULL;
        }
    }
    strides[nin] = STRIDE_ITEM;
    if (shaped == NULL) /* NumPy's result is a scalar */
        return NULL;
    int by_rows = 0; /* an operand NumPy's iterator would walk: the loop is called a row at a time */
    for (int i = 0; i < nin; i++)
        if (strides[i] == STRIDE_ROWS) {
            PyArrayObject *array = (PyArrayObject *)values[i];
            by_rows = 1; /* the loop is asked for by the inner stride it is called with */
            strides[i] = PyArray_STRIDE(array, PyArray_NDIM(array) - 1) == PyArray_ITEMSIZE(array) ? STRIDE_ITEM
                                                                                                   : STRIDE_OTHER;
        }
    if (by_rows && (out != NULL || PySet_Contains(walk_independent, ufunc) != 1)) {
        PyErr_Clear(); /* an unhashable ufunc is no member either */
        return NULL;
    }
    LoopMemo *memo = loop_for(ufunc, 0, nin, kinds, strides);
    if (memo == NULL || memo->info == NULL)
        return NULL;
    if (out != NULL && PyArray_TYPE(out) != memo->descrs[nin]->type_num)
        return NULL; /* NumPy would cast into it */
    ScalarValue scalars[2];
    char *data[3], kept[KEPT_OUTPUT_BYTES];
    npy_intp steps[3];
    for (int i = 0; i < nin; i++) {
        if (kinds[i] < KIND_PYTHON_FLOAT && kinds[i] != memo->descrs[i]->type_num)
            return NULL; /* NumPy would cast this operand */
        PyArrayObject *array = PyArray_CheckExact(values[i]) ? (PyArrayObject *)values[i] : NULL;
        data[i] = array != NULL ? PyArray_BYTES(array) : scalars[i].bytes;
        steps[i] = array == NULL || strides[i] == STRIDE_ZERO ? 0
                   : PyArray_NDIM(array) == 1            ? PyArray_STRIDE(array, 0)
                                                         : PyArray_ITEMSIZE(array);
    }
    PyObject *result;
    if (out == NULL) {
        PyArray_Descr *descr = memo->descrs[nin];
        Py_INCREF(descr);
        result = PyArray_NewFromDescr(&PyArray_Type, descr, PyArray_NDIM(shaped), PyArray_DIMS(shaped), NULL, NULL, 0, NULL);
        if (result == NULL)
            return NULL;
    } else {
        result = Py_NewRef(out);
        memcpy(kept, PyArray_BYTES(out), PyArray_NBYTES(out));
    }
    PyArrayObject *written = (PyArrayObject *)result;
    data[nin] = PyArray_BYTES(written);
    steps[nin] = PyArray_NDIM(written) == 1 ? PyArray_STRIDE(written, 0) : PyArray_ITEMSIZE(written);
    npy_intp size = PyArray_SIZE(written);
    clear_float_flags(); /* scalar conversions after: their flags hand back too */
    int handed_back = 0;
    for (int i = 0; i < nin && !handed_back; i++)
        if (kinds[i] >= KIND_PYTHON_FLOAT)
            handed_back = !python_scalar_as(values[i], memo->descrs[i], &scalars[i]);
        else if (!PyArray_CheckExact(values[i]))
            PyArray_ScalarAsCtype(values[i], scalars[i].bytes);
    if (!handed_back && size > 0)
        handed_back = by_rows ? walk_rows(memo->info, nin, values, data, written)
                              : memo->info->loop(memo->info->context, data, &size, steps, memo->info->auxdata) != 0;
    if (handed_back || PyErr_Occurred() || float_flags_raised()) {
        PyErr_Clear();
        if (out != NULL)
            memcpy(PyArray_BYTES(out), kept, PyArray_NBYTES(out));
        Py_DECREF(result);
        return NULL;
    }
    tallies[TALLY_DIRECT_LOOPS]++;
    return result;
}

/* ---- Strips: a step of elementwise ops run a block of elements at a time -----------------------

   The reference executor runs a step op by op, each NumPy ufunc over the whole shape: a pass over
   memory and a temporary of the whole shape per op. ``run_strips`` calls the loops NumPy resolves
   for the same dtypes on a block of a row at a time, every op on one block before the next (strip
   mining, as numexpr's virtual machine runs an expression): intermediates stay in buffers of a
   block, which the cache holds, and each operand is read once a block. Only ops whose every loop
   gives each element its exact or correctly rounded value (ops.WALK_INDEPENDENT_UFUNCS) run so,
   so the result is NumPy's bit for bit however the elements are walked. */

enum { STRIP_ELEMENTS = 1024, STRIP_MOST_SLOTS = 64, STRIP_MOST_STEPS = 128, STRIP_ITEM_BYTES = 16 };

typedef struct {
    PyObject *capsule;             /* strong reference, holding ``info``: the memo may drop its own */
    UfuncCallInfo *info;           /* NULL: a select (``where``) of ``selected`` bytes an element */
    npy_intp selected;
    int nin, slots[4];             /* the inputs' slots, then the output's */
    npy_intp items[4];             /* a temporary's itemsize at this step (its dtype may change) */
    ScalarValue scalars[3];        /* a Python scalar input, as the loop's dtype */
} StripStep;

/* ``where``'s elements: each chosen by its bool, copied as it is (NaN's bits too, as NumPy's),
   without a branch (a mask of random bools would mispredict every other one). */
#define SELECT_AS(type)                                                                                 \
    for (npy_intp i = 0; i < count; i++) {                                                              \
        type chosen, other, mask = (type)0 - (type)(data[0][i * steps[0]] != 0);                        \
        memcpy(&chosen, data[1] + i * steps[1], sizeof(type));                                          \
        memcpy(&other, data[2] + i * steps[2], sizeof(type));                                           \
        chosen = (chosen & mask) | (other & (type)~mask);                                               \
        memcpy(data[3] + i * steps[3], &chosen, sizeof(type));                                          \
    }
static void select_elements(npy_intp count, char *const *data, const npy_intp *steps, npy_intp size)
{
    switch (size) {
    case 1: SELECT_AS(uint8_t) break;
    case 2: SELECT_AS(uint16_t) break;
    case 4: SELECT_AS(uint32_t) break;
    case 8: SELECT_AS(uint64_t) break;
    default:
        for (npy_intp i = 0; i < count; i++)
            memcpy(data[3] + i * steps[3], data[0][i * steps[0]] ? data[1] + i * steps[1] : data[2] + i * steps[2],
                   (size_t)size);
    }
}
#undef SELECT_AS

typedef struct {
    int kind;                      /* a dtype's number, a KIND_PYTHON_*, or -1: a temporary not yet written */
    int temporary;                 /* 1: a block's buffer, written by a step before it is read */
    char *data;                    /* an array's first element, or the temporary's buffer */
    npy_intp itemsize;             /* a temporary's, as the last step planned so far wrote it */
    npy_intp strides[NPY_MAXDIMS]; /* an array's, broadcast to the shape (0 along a broadcast axis) */
} StripSlot;

/* FE_* bits as NumPy's FPE bits (float_errors: divide 1, overflow 2, underflow 4, invalid 8). */
static long numpy_float_flags(int raised)
{
    return (raised & FE_DIVBYZERO ? 1 : 0) | (raised & FE_OVERFLOW ? 2 : 0) | (raised & FE_UNDERFLOW ? 4 : 0)
           | (raised & FE_INVALID ? 8 : 0);
}

/* An operand or output array as a slot of ``shape`` (``ndim`` axes): its strides broadcast to the
   shape; an output must be of the shape itself and writeable. An operand of more than one element
   must be laid out in C order (the magnitudes of its strides shrinking along its axes of more than
   one element), as NumPy then lays out its results in C order, as the caller's outputs are. 0
   where it does not apply. */
static int strip_array(StripSlot *slot, PyArrayObject *array, int ndim, const npy_intp *shape, int output)
{
    int own = PyArray_NDIM(array);
    if (!plain_array(array) || own > ndim || (output && (own != ndim || !PyArray_ISWRITEABLE(array))))
        return 0;
    npy_intp outer = NPY_MAX_INTP;
    for (int axis = 0; axis < own && !output; axis++) {
        npy_intp stride = PyArray_STRIDE(array, axis), magnitude = stride < 0 ? -stride : stride;
        if (PyArray_DIM(array, axis) == 1)
            continue;
        if (magnitude == 0 || magnitude >= outer)
            return 0;
        outer = magnitude;
    }
    for (int axis = 0; axis < ndim; axis++) {
        int at = axis - (ndim - own);
        npy_intp extent = at < 0 ? 1 : PyArray_DIM(array, at);
        if (extent == shape[axis])
            slot->strides[axis] = shape[axis] == 1 || at < 0 ? 0 : PyArray_STRIDE(array, at);
        else if (extent == 1 && !output)
            slot->strides[axis] = 0;
        else
            return 0;
    }
    slot->kind = PyArray_TYPE(array);
    slot->temporary = 0;
    slot->data = PyArray_BYTES(array);
    return 1;
}

/* run_strips(steps, slots, shape): each step a tuple (ufunc, output slot, input slots...), or a
   select's (its dtype, output slot, bool, chosen and other slots), run in order over ``shape``, a
   block at a time. A slot is an array (an operand broadcast to the shape,
   or an output of the shape), a Python or NumPy scalar, or None: a temporary, a block's buffer.
   The floating-point flags raised (NumPy's bits), or None where NumPy's own calls must run it
   (an op or operand this cannot run exactly as NumPy would, or whose results NumPy would lay out
   otherwise than in C order: nothing is written then). */
static PyObject *run_strips(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_CheckExact(args[0]) || !PyList_CheckExact(args[1]) || !PyTuple_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "run_strips takes a tuple of steps, a list of slots and a shape");
        return NULL;
    }
    PyObject *steps = args[0], *values = args[1], *shape_tuple = args[2];
    Py_ssize_t step_count = PyTuple_GET_SIZE(steps), slot_count = PyList_GET_SIZE(values);
    int ndim = (int)PyTuple_GET_SIZE(shape_tuple);
    if (!loops_ready() || step_count == 0 || step_count > STRIP_MOST_STEPS || slot_count > STRIP_MOST_SLOTS
        || ndim < 1 || ndim > NPY_MAXDIMS)
        Py_RETURN_NONE;
    npy_intp shape[NPY_MAXDIMS];
    for (int axis = 0; axis < ndim; axis++) {
        shape[axis] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape_tuple, axis));
        if (shape[axis] <= 0) {
            PyErr_Clear();
            Py_RETURN_NONE; /* an empty shape: NumPy's calls, which compute nothing */
        }
    }
    StripSlot slots[STRIP_MOST_SLOTS];
    StripStep plan[STRIP_MOST_STEPS];
    PyObject *held[STRIP_MOST_SLOTS] = {NULL}; /* NumPy scalars as 0-d arrays */
    char *buffers = NULL;
    PyObject *result = NULL;
    int outputs[STRIP_MOST_SLOTS] = {0};
    Py_ssize_t planned_count = 0; /* the steps holding a capsule */
    for (Py_ssize_t i = 0; i < step_count; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        if (PyTuple_CheckExact(step) && PyTuple_GET_SIZE(step) >= 3) {
            PyObject *out = PyTuple_GET_ITEM(step, 1);
            Py_ssize_t at = PyLong_Check(out) ? PyLong_AsSsize_t(out) : -1;
            if (at >= 0 && at < slot_count)
                outputs[at] = 1;
        }
    }
    PyErr_Clear();
    for (Py_ssize_t i = 0; i < slot_count; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        StripSlot *slot = &slots[i];
        memset(slot->strides, 0, sizeof slot->strides);
        slot->temporary = 0;
        slot->data = NULL;
        slot->itemsize = 0;
        if (value == Py_None) {
            slot->temporary = 1, slot->kind = -1;
        } else if (PyArray_CheckExact(value)) {
            if (!strip_array(slot, (PyArrayObject *)value, ndim, shape, outputs[i]))
                goto declined;
        } else if (outputs[i]) {
            goto declined;
        } else if ((slot->kind = python_scalar_kind(value)) >= 0) {
            /* a Python scalar: each step converts it to its loop's dtype */
        } else if (PyArray_IsScalar(value, Generic)) {
            held[i] = PyArray_FromScalar(value, NULL);
            if (held[i] == NULL)
                goto done;
            if (!strip_array(slot, (PyArrayObject *)held[i], ndim, shape, 0))
                goto declined;
        } else {
            goto declined;
        }
    }
    int temporaries = 0;
    for (Py_ssize_t i = 0; i < step_count; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i), *ufunc;
        StripStep *planned = &plan[i];
        planned->capsule = NULL;
        planned->info = NULL;
        Py_ssize_t size = PyTuple_CheckExact(step) ? PyTuple_GET_SIZE(step) : 0;
        /* A ufunc's step: (ufunc, output, inputs...); a select's: (dtype, output, bool, chosen, other) */
        int selects = size == 5 && PyArray_DescrCheck(PyTuple_GET_ITEM(step, 0));
        if (!selects
            && (size < 3 || size > 4 || !Py_IS_TYPE(ufunc = PyTuple_GET_ITEM(step, 0), ufunc_type)
                || PySet_Contains(walk_independent, ufunc) != 1))
            goto declined;
        int nin = (int)size - 2, kinds[3], strides[3] = {STRIDE_OTHER, STRIDE_OTHER, STRIDE_OTHER};
        planned->nin = nin;
        for (int k = 0; k <= nin; k++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, k == nin ? 1 : k + 2));
            if (at < 0 || at >= slot_count)
                goto declined;
            planned->slots[k] = (int)at;
            planned->items[k] = slots[at].itemsize;
            if (k < nin && (kinds[k] = slots[at].kind) < 0)
                goto declined; /* a temporary read before a step writes it */
        }
        PyArray_Descr *const *descrs; /* the inputs' dtypes the step takes, then the output's */
        PyArray_Descr *selected[4];
        if (selects) {
            PyArray_Descr *descr = (PyArray_Descr *)PyTuple_GET_ITEM(step, 0);
            if (kinds[0] != NPY_BOOL || !plain_type(descr->type_num) || !PyArray_ISNBO(descr->byteorder))
                goto declined; /* NumPy would test each element for truth */
            static PyArray_Descr *bools; /* NumPy's bool dtype, kept */
            if (bools == NULL && (bools = PyArray_DescrFromType(NPY_BOOL)) == NULL)
                goto done;
            selected[0] = bools;
            selected[1] = selected[2] = selected[3] = descr;
            planned->selected = PyDataType_ELSIZE(descr);
            descrs = selected;
        } else {
            LoopMemo *memo = loop_for(ufunc, 0, nin, kinds, strides);
            if (memo == NULL)
                goto done;
            if (memo->info == NULL)
                goto declined;
            planned->capsule = Py_NewRef(memo->capsule);
            planned->info = memo->info;
            descrs = memo->descrs;
        }
        planned_count = i + 1;
        for (int k = 0; k < nin; k++) {
            if (kinds[k] >= KIND_PYTHON_FLOAT) {
                if (!python_scalar_as(PyList_GET_ITEM(values, planned->slots[k]), descrs[k], &planned->scalars[k]))
                    goto declined;
            } else if (kinds[k] != descrs[k]->type_num) {
                goto declined; /* NumPy would cast this operand */
            }
        }
        StripSlot *written = &slots[planned->slots[nin]];
        int made = descrs[nin]->type_num;
        if (written->temporary) { /* a buffer taken again may hold another dtype from here on */
            temporaries += written->kind < 0;
            written->itemsize = planned->items[nin] = PyDataType_ELSIZE(descrs[nin]);
            if (written->itemsize > STRIP_ITEM_BYTES)
                goto declined;
            written->kind = made;
        } else if (written->kind != made) {
            goto declined; /* NumPy would cast into it */
        }
    }
    /* A buffer of a block for each temporary */
    if (temporaries > 0 && (buffers = PyMem_Malloc((size_t)slot_count * STRIP_ELEMENTS * STRIP_ITEM_BYTES)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < slot_count; i++)
        if (slots[i].temporary)
            slots[i].data = buffers + i * STRIP_ELEMENTS * STRIP_ITEM_BYTES;
    /* The last two axes as one, while every array walks them as one */
    while (ndim > 1) {
        int joined = 1;
        for (Py_ssize_t i = 0; i < slot_count && joined; i++)
            if (!slots[i].temporary && slots[i].data != NULL)
                joined = slots[i].strides[ndim - 2] == shape[ndim - 1] * slots[i].strides[ndim - 1];
        if (!joined)
            break;
        shape[ndim - 2] *= shape[ndim - 1];
        for (Py_ssize_t i = 0; i < slot_count; i++)
            slots[i].strides[ndim - 2] = slots[i].strides[ndim - 1];
        ndim--;
    }
    npy_intp inner = shape[ndim - 1], rows = 1, index[NPY_MAXDIMS] = {0};
    for (int axis = 0; axis < ndim - 1; axis++)
        rows *= shape[axis];
    int failed = 0, raised = 0;
    clear_float_flags();
    Py_BEGIN_ALLOW_THREADS
    char *row[STRIP_MOST_SLOTS];
    for (npy_intp done_rows = 0; done_rows < rows && !failed; done_rows++) {
        for (Py_ssize_t i = 0; i < slot_count; i++) {
            row[i] = slots[i].data;
            if (!slots[i].temporary && row[i] != NULL)
                for (int axis = 0; axis < ndim - 1; axis++)
                    row[i] += index[axis] * slots[i].strides[axis];
        }
        for (npy_intp start = 0; start < inner && !failed; start += STRIP_ELEMENTS) {
            npy_intp count = inner - start < STRIP_ELEMENTS ? inner - start : STRIP_ELEMENTS;
            for (Py_ssize_t s = 0; s < step_count && !failed; s++) {
                StripStep *planned = &plan[s];
                char *data[4];
                npy_intp steps_of[4];
                for (int k = 0; k <= planned->nin; k++) {
                    StripSlot *slot = &slots[planned->slots[k]];
                    if (slot->temporary) {
                        data[k] = slot->data, steps_of[k] = planned->items[k];
                    } else if (slot->data == NULL) { /* a Python scalar */
                        data[k] = planned->scalars[k].bytes, steps_of[k] = 0;
                    } else {
                        steps_of[k] = slot->strides[ndim - 1];
                        data[k] = row[planned->slots[k]] + start * steps_of[k];
                    }
                }
                if (planned->info == NULL) {
                    select_elements(count, data, steps_of, planned->selected);
                    continue;
                }
                failed = planned->info->loop(planned->info->context, data, &count, steps_of, planned->info->auxdata) != 0;
                raised |= float_status(); /* read after each loop: some clear the flags they end with */
            }
        }
        for (int axis = ndim - 2; axis >= 0 && ++index[axis] == shape[axis]; axis--)
            index[axis] = 0;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "a NumPy loop failed in run_strips");
        goto done;
    }
    result = PyLong_FromLong(numpy_float_flags(raised));
    tallies[TALLY_STRIP_RUNS]++;
    goto done;
declined:
    PyErr_Clear();
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(buffers);
    for (Py_ssize_t i = 0; i < slot_count; i++)
        Py_XDECREF(held[i]);
    for (Py_ssize_t i = 0; i < planned_count; i++)
        Py_XDECREF(plan[i].capsule);
    return result;
}

/* direct: the op's reference called now on the operands' buffers and scalars; NumPy's loop called
   directly where the op is ``elementwise`` (a library call's gufunc has no such loop). */
static PyObject *run_direct(PyObject *op, PyObject *const *operands, Py_ssize_t count, int elementwise)
{
    PyObject *values[3];
    for (Py_ssize_t i = 0; i < count; i++)
        values[i] = Py_IS_TYPE(operands[i], S.array_type) ? NODE_SLOT(ARRAY_SLOT(operands[i], ARRAY_NODE), BUFFER)
                                                          : operands[i];
    PyObject *reference = op_reference(op);
    if (reference == NULL)
        return NULL;
    PyObject *made = elementwise ? loop_now(reference, values, count, NULL) : NULL;
    if (made == NULL && !PyErr_Occurred())
        made = PyObject_Vectorcall(reference, values, count, NULL);
    Py_DECREF(reference);
    return made == NULL ? NULL : direct_result(made);
}

/* The most axes among ``count`` shapes. */
static Py_ssize_t most_axes(PyObject *const *shapes, int count)
{
    Py_ssize_t ndim = 0;
    for (int which = 0; which < count; which++)
        if (PyTuple_GET_SIZE(shapes[which]) > ndim)
            ndim = PyTuple_GET_SIZE(shapes[which]);
    return ndim;
}

/* The elements of ``count`` shapes broadcast together: an upper bound where they do not
   broadcast. -1 with an error set. */
static Py_ssize_t broadcast_size(PyObject *const *shapes, int count)
{
    if (count == 1)
        return shape_size(shapes[0]);
    Py_ssize_t ndim = most_axes(shapes, count), size = 1;
    for (Py_ssize_t axis = 0; axis < ndim; axis++) {
        Py_ssize_t extent = 1;
        for (int which = 0; which < count; which++) {
            PyObject *shape = shapes[which];
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

/* The shape ``count`` shapes broadcast to, a new tuple; None where they do not broadcast or it is
   empty (the general path then raises NumPy's error, or probes the empty operands); NULL with an
   error set. */
static PyObject *broadcast_shape(PyObject *const *shapes, int count)
{
    Py_ssize_t ndim = most_axes(shapes, count);
    PyObject *shape = PyTuple_New(ndim);
    for (Py_ssize_t axis = 0; shape != NULL && axis < ndim; axis++) {
        Py_ssize_t extent = 1;
        PyObject *item = NULL;
        for (int which = 0; which < count; which++) {
            PyObject *operand = shapes[which];
            Py_ssize_t offset = axis - (ndim - PyTuple_GET_SIZE(operand)), here;
            if (offset < 0)
                continue;
            here = PyLong_AsSsize_t(PyTuple_GET_ITEM(operand, offset));
            if (here == -1 && PyErr_Occurred()) {
                Py_DECREF(shape);
                return NULL;
            }
            if (here == 0 || (here != 1 && extent != 1 && here != extent)) {
                Py_DECREF(shape);
                return Py_NewRef(Py_None);
            }
            if (here != 1 || item == NULL) {
                extent = here;
                item = PyTuple_GET_ITEM(operand, offset);
            }
        }
        PyTuple_SET_ITEM(shape, axis, Py_NewRef(item));
    }
    return shape;
}

/* A Python int's value (not a bool's, not NumPy's), where it fits: 1, else 0. */
static int int_value(PyObject *value, Py_ssize_t *result)
{
    if (!PyLong_CheckExact(value))
        return 0;
    *result = PyLong_AsSsize_t(value);
    if (*result == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Sites: where the program calls an elementwise op (its Python code object and the instruction,
   and where that frame was called from: a helper called twice a run has a site at each call), and
   whether what it computes there is recorded though its operands are small computed arrays,
   which direct execution would run at once (tiers.py's recording policy). A site runs its op
   directly, counting, until ``trial_at`` runs; then it records once (a trial) and runs directly
   again until the materialization that computes what it recorded gives a verdict (give_verdict):
   it records from then on (each run noted, and settled again), or runs directly until twice as
   many runs again (a compile not yet paid for, which the tier policy pays from the runs counted:
   ``site_repeats``), or until ``most_trial_at`` runs (recording cannot pay there). A noted site
   reached again while what it recorded is still pending had its value carried into the loop's
   next run: that value is computed then (``end_carried``), so a trial costs one run of the loop,
   not every run left. What a site does depends only on how often the program ran it, never on
   timing. dynfuse's own code is no site of its own: where it calls an op for the program (``a **
   b``, a function of dynfuse.numpy), the site is the program's frame that called it, told apart
   by where dynfuse's innermost frame calls the op. */
enum { SITE_DIRECT, SITE_WAITING, SITE_RECORDING };
enum { SITE_TABLE = 1024, SITE_WAYS = 4, RECENT_SITES = 64, OURS_CACHE = 256, MOST_FRAMES_OF_OURS = 8 };
typedef struct {
    PyObject *code;  /* the program's frame's (strong reference); NULL: an empty entry */
    PyObject *inner; /* dynfuse's innermost frame's, calling the op for it (strong reference); NULL: none */
    PyObject *outer; /* the frame's caller's (strong reference); NULL: none */
    int lasti, inner_lasti, outer_lasti, state;
    int excused; /* a recording site's last verdict was "not yet", taken as it is (give_verdict) */
    Py_ssize_t runs, trial_at; /* runs since the last trial or verdict, and the next trial's */
    Py_ssize_t repeats;        /* the runs its last noted recording stands for */
    PyObject *last;            /* a weak reference to the node its last noted run recorded; NULL: none */
} Site;
static Site site_table[SITE_TABLE];
/* The sites noted (a trial, or a recording run) and not settled since (``settle``) */
static Site *recent_sites[RECENT_SITES];
static int recent_count;
static Py_ssize_t first_trial_at = 0; /* tiers.SITE_TRIAL_AT, bound; 0: sites off */
static Py_ssize_t most_trial_at = 0;
static Site *noted_site; /* the site noted by the op being recorded, for its ``last`` */
static int run_has_last; /* a site noted since the sites were last settled keeps its last */
/* A site that records the op its C fast path declined to run at once, while the general path
   records it (whose consults of the site, from other frames, must not count runs again) */
static Site *recording_for;

static int code_is_ours(PyCodeObject *code)
{
    PyObject *filename = code->co_filename;
    return S.package_path != NULL && PyUnicode_Check(filename)
           && PyUnicode_Tailmatch(filename, S.package_path, 0, PY_SSIZE_T_MAX, -1) == 1;
}

/* code_is_ours, remembered per code object (each held, so its address is not reused meanwhile) */
static struct {
    PyObject *code;
    int ours;
} ours_cache[OURS_CACHE];

static int is_ours(PyCodeObject *code)
{
    size_t slot = ((size_t)code >> 4) % OURS_CACHE;
    if (ours_cache[slot].code != (PyObject *)code) {
        Py_XSETREF(ours_cache[slot].code, Py_NewRef((PyObject *)code));
        ours_cache[slot].ours = code_is_ours(code);
    }
    return ours_cache[slot].ours;
}

/* Where the program runs the op being recorded: its innermost frame outside dynfuse, the frame that
   called it (outer; NULL: none), and dynfuse's innermost frame where dynfuse's code calls the op for
   it (inner; NULL: the program calls it itself). Codes are borrowed from frames that outlive the
   op's recording. */
typedef struct {
    PyCodeObject *code, *inner, *outer;
    int lasti, inner_lasti, outer_lasti;
} Place;

/* The place of the op whose C fast path runs its general Python path now (``op_placed``): every op
   that path records is that op's, at that place. */
static Place op_place;
static int op_placed;

/* The calling place; 0 where there is no frame of the program's within MOST_FRAMES_OF_OURS. */
static int calling_place(Place *place)
{
    if (op_placed) {
        *place = op_place;
        return 1;
    }
    PyFrameObject *frame = PyEval_GetFrame(), *held = NULL; /* borrowed; a reference GetBack gave */
    place->inner = NULL;
    place->inner_lasti = -1;
    int found = 0;
    for (int depth = 0; frame != NULL && depth <= MOST_FRAMES_OF_OURS; depth++) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        Py_DECREF(code); /* the frame holds it */
        int lasti = PyFrame_GetLasti(frame);
        if (!is_ours(code)) {
            place->code = code;
            place->lasti = lasti;
            /* Where the program's frame was called from: a helper the loop calls twice a run
               (a Laplacian of each of two fields) has a site at each call */
            PyFrameObject *caller = PyFrame_GetBack(frame);
            place->outer = NULL;
            place->outer_lasti = -1;
            if (caller != NULL) {
                PyCodeObject *outer = PyFrame_GetCode(caller);
                Py_DECREF(outer); /* the caller's frame holds it */
                place->outer = outer;
                place->outer_lasti = PyFrame_GetLasti(caller);
                Py_DECREF(caller);
            }
            found = 1;
            break;
        }
        if (place->inner == NULL) {
            place->inner = code;
            place->inner_lasti = lasti;
        }
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_XDECREF(held); /* the frame the next one's back refers to holds it no more: ``back`` does */
        frame = held = back;
    }
    Py_XDECREF(held);
    return found;
}

static void forget_recent(Site *site)
{
    for (int i = 0; i < recent_count; i++)
        if (recent_sites[i] == site) {
            memmove(recent_sites + i, recent_sites + i + 1, sizeof(Site *) * (recent_count - i - 1));
            recent_count--;
            return;
        }
}

static void set_state(Site *site, int state)
{
    if (state == SITE_DIRECT) {
        Py_CLEAR(site->last);
        forget_recent(site);
    }
    site->state = state;
}

static int is_site(const Site *site, const Place *place)
{
    return site->code == (PyObject *)place->code && site->lasti == place->lasti
           && site->inner == (PyObject *)place->inner && site->inner_lasti == place->inner_lasti
           && site->outer == (PyObject *)place->outer && site->outer_lasti == place->outer_lasti;
}

/* The entry where a place's site belongs, among the SITE_WAYS of its set: its own, an empty one, or
   the one to give up for it, a site that runs directly before one that records, the fewest runs
   counted first (a loop's sites meeting in one set take turns there no more). */
static Site *site_entry(const Place *place)
{
    size_t hash = ((size_t)place->code >> 4) * 1000003u ^ (size_t)place->lasti;
    hash = (hash * 31u) ^ ((size_t)place->inner >> 4) ^ ((size_t)place->inner_lasti << 7);
    hash = (hash * 31u) ^ ((size_t)place->outer >> 4) ^ ((size_t)place->outer_lasti << 11);
    Site *set = &site_table[(hash ^ (hash >> 13)) % (SITE_TABLE / SITE_WAYS) * SITE_WAYS], *chosen = NULL;
    for (int way = 0; way < SITE_WAYS; way++) {
        Site *site = &set[way];
        if (is_site(site, place))
            return site;
        if (chosen != NULL && chosen->code == NULL)
            continue;
        int direct = site->state == SITE_DIRECT, chosen_direct = chosen != NULL && chosen->state == SITE_DIRECT;
        if (chosen == NULL || site->code == NULL || direct > chosen_direct
            || (direct == chosen_direct && site->runs < chosen->runs))
            chosen = site;
    }
    return chosen;
}

static Site *site_of(const Place *place)
{
    Site *site = site_entry(place);
    if (is_site(site, place))
        return site;
    /* A new site, or another in its place (forgotten: counted afresh if it comes back) */
    set_state(site, SITE_DIRECT);
    Py_XSETREF(site->code, Py_NewRef((PyObject *)place->code));
    Py_XSETREF(site->inner, Py_XNewRef((PyObject *)place->inner));
    Py_XSETREF(site->outer, Py_XNewRef((PyObject *)place->outer));
    site->outer_lasti = place->outer_lasti;
    site->lasti = place->lasti;
    site->inner_lasti = place->inner_lasti;
    site->runs = site->repeats = 0;
    site->excused = 0;
    site->trial_at = first_trial_at;
    return site;
}

/* The calling place's site: NULL where the program has no frame there. */
static Site *calling_site(void)
{
    Place place;
    return calling_place(&place) ? site_of(&place) : NULL;
}

static void note(Site *site)
{
    forget_recent(site);
    if (recent_count == RECENT_SITES) /* the oldest goes unsettled: it stays as it is */
        forget_recent(recent_sites[0]);
    recent_sites[recent_count++] = site;
    noted_site = site;
}

/* Whether the op the calling Python frame runs now is recorded though direct execution would take
   it. */
static int site_records(void)
{
    if (recording_for != NULL) {
        noted_site = recording_for;
        return 1;
    }
    if (first_trial_at <= 0)
        return 0;
    Site *site = calling_site();
    if (site == NULL)
        return 0;
    site->runs++;
    if (site->state == SITE_RECORDING) {
        site->repeats = 1;
        note(site);
        return 1;
    }
    /* While sites are noted (a trial, a recording run), one near its own trial joins it: the sites
       of a statement count their runs apart where an op of it recorded for a pending operand
       (``q[k - 1]`` of a ``q`` its copy left pending at a loop's start), and a trial of some alone
       would fuse a fragment of the statement, which cannot pay. */
    Py_ssize_t early = recent_count > 0 && site->trial_at < most_trial_at ? site->trial_at / 4 : 0;
    if (site->runs < site->trial_at - early)
        return 0;
    /* A trial, which stands for the runs since the last (one never settled included) */
    set_state(site, SITE_WAITING);
    site->repeats = site->runs;
    site->runs = 0;
    note(site);
    return 1;
}

/* The node a weak reference (NULL: none) refers to, where it is alive and still pending
   (borrowed); NULL otherwise. */
static PyObject *pending_referent(PyObject *ref)
{
    PyObject *node = ref == NULL ? Py_None : PyWeakref_GetObject(ref);
    return node != Py_None && PyTuple_GET_SIZE(NODE_SLOT(node, INPUTS)) > 0 ? node : NULL;
}

static int refers_to_pending(PyObject *ref)
{
    return pending_referent(ref) != NULL;
}

/* A site's verdict (``tiers.recording_verdict``): recording paid (1: it records from now on), not
   yet (0: the trace ran interpreted, its kernels' compile not yet paid for; it runs directly, and
   tries again after twice as many runs), or it cannot (-1: the trace fuses too few ops a kernel;
   it runs directly, and tries again only after ``most_trial_at`` runs). A recording site takes
   one "not yet" in a row as it is and records on: the program reading its loop's values once the
   loop is done is a trace of another structure (the loop's variables no longer held), planned and
   interpreted the first times, which says nothing of the loop's runs. */
static void give_verdict(Site *site, Py_ssize_t verdict)
{
    Py_CLEAR(site->last);
    int excused = verdict == 0 && site->state == SITE_RECORDING && !site->excused;
    site->excused = excused;
    if (verdict > 0 || excused) {
        site->state = SITE_RECORDING;
    } else {
        site->state = SITE_DIRECT;
        Py_ssize_t doubled = site->trial_at * 2 < most_trial_at ? site->trial_at * 2 : most_trial_at;
        site->trial_at = verdict < 0 ? most_trial_at : doubled;
    }
    site->runs = 0;
}

/* ``node`` is what the op being recorded made. The site that recorded it (``noted_site``) keeps it
   as its last. While what sites recorded is pending, the calling place's site (whose op recorded
   it for a pending operand) is noted with them: the materialization's verdict settles it with the
   sites whose trace it joined, so that all of them count their runs from then on together and
   try recording in the same run of the loop; and the first such site since the sites were last
   settled, where none keeps a last yet, keeps it as its last: the program's loop, coming back to
   that place, finds it pending (end_carried). -1 with an error set. */
static int mark_recorded(PyObject *node)
{
    Site *site = noted_site;
    noted_site = NULL;
    if (site == NULL && recent_count > 0 && (site = calling_site()) != NULL) {
        note(site);
        noted_site = NULL;
        site->repeats = 0; /* it ran no run directly: the trace stands for its consulted sites' runs */
        if (run_has_last) {
            Py_CLEAR(site->last);
            return 0;
        }
    }
    if (site == NULL)
        return 0;
    Py_XSETREF(site->last, PyWeakref_NewRef(node, NULL));
    run_has_last = 1;
    return site->last == NULL ? -1 : 0;
}

static int replayed_run(void);

/* Where the calling frame's site is noted and what it recorded is still pending, the program's
   loop has come back to it, carrying what depends on that value into its next run: that is
   computed now (execute.materialize_carried), so each run of the loop is a trace of its own, of
   one structure, which replays; the materialization settles the sites that recorded it. -1 with
   an error set. */
static int end_carried(void)
{
    Place place;
    if (!calling_place(&place))
        return 0;
    Site *site = site_entry(&place);
    PyObject *node = is_site(site, &place) ? pending_referent(site->last) : NULL;
    if (node == NULL)
        return 0;
    /* the common case, as materialize_carried's materialize starts: the run's kept launch */
    int replayed = replayed_run();
    if (replayed != 0)
        return replayed < 0 ? -1 : 0;
    Py_INCREF(node);
    PyObject *done = PyObject_CallOneArg(S.materialize_carried, node);
    Py_DECREF(node);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether ``node`` is one of ``members``' items, or, with ``ancestors``, ``members`` itself or one of
   the tuple ``ancestors``' items. */
static int among(PyObject *node, PyObject *members, PyObject *ancestors)
{
    if (ancestors != NULL) {
        if (node == members)
            return 1;
        members = ancestors;
    }
    PyObject *fast = PySequence_Fast(members, "the members of a materialization are a sequence");
    if (fast == NULL) {
        PyErr_Clear();
        return 0;
    }
    int found = 0;
    for (Py_ssize_t i = 0; !found && i < PySequence_Fast_GET_SIZE(fast); i++)
        found = PySequence_Fast_GET_ITEM(fast, i) == node;
    Py_DECREF(fast);
    return found;
}

/* The most a verdict may be now (tiers.cap_verdicts): 0 while the program reads several values of a
   loop's run (each run reading them goes through Python's writes and reads around the replay,
   which fusing them does not pay for), 1 otherwise. */
static Py_ssize_t verdict_cap = 1;

/* A materialization's verdict (give_verdict), for each noted site whose recorded node it computed
   (among its nodes: ``members``, or ``members`` and its ``ancestors``) or that is gone: a site whose
   node lives on outside it waits for the materialization that computes it. */
static void settle(Py_ssize_t verdict, PyObject *members, PyObject *ancestors)
{
    int kept = 0;
    if (verdict > verdict_cap)
        verdict = verdict_cap;
    for (int i = 0; i < recent_count; i++) {
        Site *site = recent_sites[i];
        PyObject *node = site->last == NULL ? Py_None : PyWeakref_GetObject(site->last);
        if (node != Py_None && !among(node, members, ancestors)) {
            recent_sites[kept++] = site;
            continue;
        }
        give_verdict(site, verdict);
    }
    recent_count = kept;
    run_has_last &= kept > 0;
}

/* tiers.sites(): each site known, as (code, instruction offset, state, runs, next trial's run). */
static PyObject *site_states(PyObject *module, PyObject *unused)
{
    static const char *const names[] = {"direct", "waiting", "recording"};
    PyObject *found = PyList_New(0);
    for (int i = 0; found != NULL && i < SITE_TABLE; i++) {
        Site *site = &site_table[i];
        if (site->code == NULL)
            continue;
        PyObject *row = Py_BuildValue("(Oisnn)", site->code, site->lasti, names[site->state], site->runs, site->trial_at);
        if (row == NULL || PyList_Append(found, row) < 0)
            Py_CLEAR(found);
        Py_XDECREF(row);
    }
    return found;
}

/* tiers.settle_sites(verdict, nodes) */
static PyObject *settle_sites(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "settle_sites(verdict, nodes)");
        return NULL;
    }
    Py_ssize_t value = PyLong_AsSsize_t(args[0]);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    if (recent_count)
        settle(value, args[1], NULL);
    Py_RETURN_NONE;
}

/* tiers.site_repeats(): how many runs the sites that recorded since the last materialization stand
   for (the most of them; 0 where none did): the runs their trace would have had recorded. */
static PyObject *site_repeats(PyObject *module, PyObject *unused)
{
    Py_ssize_t most = 0;
    for (int i = 0; i < recent_count; i++)
        if (recent_sites[i]->repeats > most)
            most = recent_sites[i]->repeats;
    return PyLong_FromSsize_t(recent_count ? (most > 1 ? most : 1) : 0);
}

/* tiers.cap_verdicts(cap): verdicts at most ``cap`` from now on; the cap before. */
static PyObject *cap_verdicts(PyObject *module, PyObject *cap)
{
    Py_ssize_t value, before = verdict_cap;
    if (!int_value(cap, &value)) {
        PyErr_SetString(PyExc_TypeError, "cap_verdicts takes an int");
        return NULL;
    }
    verdict_cap = value;
    return PyLong_FromSsize_t(before);
}

/* tiers.site_records() */
static PyObject *site_records_now(PyObject *module, PyObject *unused)
{
    noted_site = NULL;
    return PyBool_FromLong(site_records());
}

/* tiers.note_recorded(node) */
static PyObject *note_recorded(PyObject *module, PyObject *node)
{
    return mark_recorded(node) < 0 ? NULL : Py_NewRef(Py_None);
}

/* tiers.set_site_trials(first, most): when a site's first trial comes, and the most runs between
   trials; 0 turns sites off. Every site is forgotten. */
static PyObject *set_site_trials(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t first, most;
    if (nargs != 2 || !int_value(args[0], &first) || !int_value(args[1], &most) || first < 0 || most < first) {
        PyErr_SetString(PyExc_TypeError, "set_site_trials(first, most) takes ints, 0 <= first <= most");
        return NULL;
    }
    for (int i = 0; i < SITE_TABLE; i++) {
        set_state(&site_table[i], SITE_DIRECT);
        Py_CLEAR(site_table[i].code);
        Py_CLEAR(site_table[i].inner);
        Py_CLEAR(site_table[i].outer);
    }
    first_trial_at = first;
    most_trial_at = most;
    Py_RETURN_NONE;
}

/* record._common_dtypes by the identities of (op, the operands' kinds). */
enum { COMMON_DTYPE_MEMO_SIZE = 256 };
static IdentityEntry common_dtype_memo[COMMON_DTYPE_MEMO_SIZE];

static PyObject *record_common_here(PyObject *const *args, Py_ssize_t nargs, PyObject *into);

/* record_common_here while what sites recorded is pending, at the place the program calls it,
   found once for the checks and notes of its sites. */
static PyObject *record_common_placed(PyObject *const *args, Py_ssize_t nargs, PyObject *into)
{
    if (recent_count == 0 || op_placed)
        return record_common_here(args, nargs, into);
    op_placed = calling_place(&op_place);
    PyObject *result = record_common_here(args, nargs, into);
    op_placed = 0;
    return result;
}

/* record.record_common(op, *operands), of one to three operands. */
static PyObject *record_common(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return record_common_placed(args, nargs, NULL);
}

/* Whether a result of ``dtype`` and ``shape`` is what an in-place operator may rebind ``into``
   (a LazyArray) to: its own dtype and shape. -1 with an error. */
static int fits_into(PyObject *dtype, PyObject *shape, PyObject *into)
{
    PyObject *written = ARRAY_SLOT(into, ARRAY_NODE);
    return dtype == NODE_SLOT(written, DTYPE) ? PyObject_RichCompareBool(shape, NODE_SLOT(written, SHAPE), Py_EQ) : 0;
}

/* The lazy operands' nodes and the scalars' stand-ins, as a tuple: the inputs of their node. */
static PyObject *operand_nodes(PyObject *const *operands, Py_ssize_t count)
{
    PyObject *inputs = PyTuple_New(count);
    for (Py_ssize_t i = 0; inputs != NULL && i < count; i++) {
        PyObject *node = Py_IS_TYPE(operands[i], S.array_type) ? Py_NewRef(ARRAY_SLOT(operands[i], ARRAY_NODE))
                                                                : new_scalar(operands[i]);
        if (node == NULL)
            Py_CLEAR(inputs);
        else
            PyTuple_SET_ITEM(inputs, i, node);
    }
    return inputs;
}

/* record._common_dtypes' answer for ``op`` on operands of ``kinds`` (dtypes, or the weak scalars'
   types), memoized by identity: a dtype, or False where the common case does not apply. ``inputs``
   (their nodes) is made from ``operands`` where NULL and needed. A new reference; NULL with an
   error. */
static PyObject *common_dtype(PyObject *op, PyObject *const *operands, PyObject *const *kinds, Py_ssize_t count,
                              PyObject *inputs)
{
    PyObject *parts[IDENTITY_PARTS] = {op, kinds[0], count < 2 ? NULL : kinds[1], count < 3 ? NULL : kinds[2]};
    IdentityEntry *entry = identity_entry(common_dtype_memo, COMMON_DTYPE_MEMO_SIZE, parts);
    PyObject *dtype = identity_get(entry, parts);
    if (dtype != NULL)
        return Py_NewRef(dtype);
    PyObject *key = PyTuple_New(count + 1);
    if (key == NULL)
        return NULL;
    PyTuple_SET_ITEM(key, 0, Py_NewRef(op));
    for (Py_ssize_t i = 0; i < count; i++)
        PyTuple_SET_ITEM(key, i + 1, Py_NewRef(kinds[i]));
    dtype = PyDict_GetItemWithError(S.common_dtypes, key);
    if (dtype != NULL) {
        Py_INCREF(dtype);
    } else if (!PyErr_Occurred()) {
        PyObject *nodes = inputs != NULL ? Py_NewRef(inputs) : operand_nodes(operands, count);
        dtype = nodes == NULL ? NULL : PyObject_CallFunctionObjArgs(S.common_result, op, nodes, NULL);
        Py_XDECREF(nodes);
        if (dtype != NULL && PyDict_SetItem(S.common_dtypes, key, dtype) < 0)
            Py_CLEAR(dtype);
    }
    Py_DECREF(key);
    if (dtype != NULL)
        identity_put(entry, parts, dtype);
    return dtype;
}

/* ``op(*operands)``, recorded or run at once; with ``into`` (the array an in-place operator
   writes), None without recording anything where the result would not fit it (``fits_into``),
   so that the operator's general path records the cast instead. */
static PyObject *record_common_here(PyObject *const *args, Py_ssize_t nargs, PyObject *into)
{
    BIND_CHECK();
    if (nargs < 2 || nargs > 4) {
        PyErr_Format(PyExc_TypeError, "record_common takes 2 to 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *op = args[0], *operands[3] = {args[1], nargs >= 3 ? args[2] : NULL, nargs == 4 ? args[3] : NULL};
    if (recent_count > 0 && end_carried() < 0)
        return NULL;
    noted_site = NULL;
    PyObject *kinds[3] = {NULL, NULL, NULL}, *result = NULL;
    PyObject *array = NULL; /* borrowed: the operand node whose shape the result has */
    Py_ssize_t count = nargs - 1;
    /* every lazy operand holds a host buffer; NumPy scalars seen; the lazy operands' shapes agree */
    int computed = 1, numpy_scalars = 0, same_shapes = 1, shape_count = 0;
    PyObject *shapes[3]; /* borrowed: the lazy operands' shapes */
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *operand = operands[i];
        if (Py_IS_TYPE(operand, S.array_type)) {
            PyObject *node = ARRAY_SLOT(operand, ARRAY_NODE);
            if (node == NULL) {
                PyErr_SetString(PyExc_AttributeError, "LazyArray has no node");
                return NULL;
            }
            shapes[shape_count] = NODE_SLOT(node, SHAPE);
            if (shape_count > 0 && same_shapes) {
                int same = PyObject_RichCompareBool(shapes[shape_count], shapes[0], Py_EQ);
                if (same < 0)
                    return NULL;
                same_shapes = same;
            }
            shape_count++;
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
        Py_ssize_t size = broadcast_size(shapes, same_shapes ? 1 : shape_count);
        if (size == -1)
            return NULL;
        Py_ssize_t limit = direct_limit();
        if (limit == -1 && PyErr_Occurred())
            return NULL;
        if (size < limit && (numpy_scalars || !site_records())) {
            if (into != NULL) { /* what would not fit is not run: the general path runs the cast */
                if (numpy_scalars)
                    return Py_NewRef(Py_None);
                PyObject *dtype = common_dtype(op, operands, kinds, count, NULL);
                PyObject *shape = dtype == NULL ? NULL
                                  : same_shapes ? Py_NewRef(shapes[0])
                                                : broadcast_shape(shapes, shape_count);
                int fits = shape == NULL ? -1 : shape == Py_None || dtype == Py_False ? 0 : fits_into(dtype, shape, into);
                Py_XDECREF(dtype);
                Py_XDECREF(shape);
                if (fits <= 0)
                    return fits < 0 ? NULL : Py_NewRef(Py_None);
            }
            return run_direct(op, operands, count, 1);
        }
    }
    if (numpy_scalars || has_zero_extent(NODE_SLOT(array, SHAPE)))
        return Py_NewRef(Py_None); /* an empty result: the general path probes empty operands */
    PyObject *shape = same_shapes ? Py_NewRef(shapes[0]) : broadcast_shape(shapes, shape_count);
    if (shape == NULL || shape == Py_None)
        return shape;
    PyObject *inputs = operand_nodes(operands, count), *dtype = NULL;
    if (inputs == NULL || (dtype = common_dtype(op, operands, kinds, count, inputs)) == NULL)
        goto release;
    int fits = dtype == Py_False ? 0 : into == NULL ? 1 : fits_into(dtype, shape, into);
    if (fits < 0)
        goto release;
    if (fits == 0) {
        result = Py_NewRef(Py_None);
        goto release;
    }
    PyObject *node = new_node(op, inputs, S.empty, shape, dtype);
    if (node != NULL && mark_recorded(node) < 0)
        Py_CLEAR(node);
    int scalar = PyTuple_GET_SIZE(shape) == 0; /* NumPy's scalar, unless the op gives 0-d arrays (where) */
    if (node != NULL && scalar) {
        PyObject *gives = PyObject_GetAttrString(op, "scalar_results");
        scalar = gives == NULL ? -1 : PyObject_IsTrue(gives);
        Py_XDECREF(gives);
        if (scalar < 0)
            Py_CLEAR(node);
    }
    if (node != NULL)
        result = new_array(node, NULL, scalar);
release:
    Py_XDECREF(dtype);
    Py_XDECREF(inputs);
    Py_DECREF(shape);
    return result;
}

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
        if (PyLong_CheckExact(item) || (slices && (PySlice_Check(item) || item == Py_None || item == Py_Ellipsis))
            || PyArray_IsScalar(item, Integer))
            continue;
        return 0;
    }
    return 1;
}

/* ---- views, reductions and casts ------------------------------------------------------------
   record.getitem, reshape, transpose, expand_dims, astype and the reductions' methods, and
   LazyArray.squeeze, for their common case on a pending array: Python ints, slices of them, None
   and Ellipsis as indices; ints and tuples of ints as shapes and axes. Anything else, and whatever
   NumPy would raise for, is declined (None): the Python function then runs, and raises NumPy's
   error. So is an array whose node is a computed leaf: the Python function decides whether NumPy
   runs the op at once. Params, shapes and nodes are those the Python functions build. */

/* More axes than this (NumPy allows 64) go to Python. */
#define MAX_AXES 32

static PyObject *declined(void)
{
    return Py_NewRef(Py_None);
}

/* Whether no node is pending in any thread: each recording's list of references is empty (a
   list not swept since its nodes were computed answers no; the Python path then sweeps it). */
static int nothing_pending(void)
{
    PyObject *recordings = SLOT(S.pending, S.recordings_offset);
    if (recordings == NULL || !PyList_CheckExact(recordings))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(recordings); i++) {
        PyObject *recording = PyList_GET_ITEM(recordings, i);
        PyObject *refs = Py_TYPE(recording) == S.recording_type ? SLOT(recording, S.refs_offset) : NULL;
        if (refs == NULL || !PyList_CheckExact(refs) || PyList_GET_SIZE(refs) != 0)
            return 0;
    }
    return 1;
}

/* trace.nothing_pending_swept(): this thread's list of references swept in place (the dead and
   the computed go), then nothing_pending. */
static PyObject *nothing_pending_swept(PyObject *module, PyObject *unused)
{
    BIND_CHECK();
    if (R.refs == NULL || R.thread != PyThreadState_GetID(PyThreadState_Get())) { /* Python's, then */
        PyObject *swept = PyObject_CallMethodNoArgs(S.pending, S.str_sweep_own);
        if (swept == NULL)
            return NULL;
        Py_DECREF(swept);
    } else if (compact_refs(R.refs, refers_to_pending) < 0) {
        return NULL;
    }
    return PyBool_FromLong(nothing_pending());
}

/* Whether ``node`` is in ``table`` (open addressing, ``mask`` + 1 slots, NULL empty), adding it if
   ``add``. */
static int in_pointer_table(PyObject **table, size_t mask, PyObject *node, int add)
{
    size_t slot = (((size_t)node >> 4) * (size_t)0x9E3779B97F4A7C15u) & mask;
    while (table[slot] != NULL) {
        if (table[slot] == node)
            return 1;
        slot = (slot + 1) & mask;
    }
    if (add)
        table[slot] = node;
    return 0;
}

/* Whether a node's op is a view (ops.VIEWS) */
static int is_view(PyObject *node)
{
    return PySet_Contains(S.view_ops, NODE_SLOT(node, OP)) == 1;
}

/* Whether what this thread has pending is ``node``'s trace alone, no view among it: the run of the
   program's loop that ``node`` ends is ``node`` (replay_now's common case, told without lists);
   0 also where that would take more than a small table to tell. */
static int pending_run_is(PyObject *node)
{
    enum { MOST_INPUTS = 128 };
    PyObject *read[4 * MOST_INPUTS] = {NULL};
    if (R.refs == NULL || R.thread != PyThreadState_GetID(PyThreadState_Get()) || compact_refs(R.refs, refers_to_pending) < 0) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t count = PyList_GET_SIZE(R.refs), inputs = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pending = PyWeakref_GetObject(PyList_GET_ITEM(R.refs, i)), *pending_inputs = NODE_SLOT(pending, INPUTS);
        if (is_view(pending) || (inputs += PyTuple_GET_SIZE(pending_inputs)) > MOST_INPUTS)
            return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(pending_inputs); j++)
            in_pointer_table(read, 4 * MOST_INPUTS - 1, PyTuple_GET_ITEM(pending_inputs, j), 1);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pending = PyWeakref_GetObject(PyList_GET_ITEM(R.refs, i));
        if (pending != node && !in_pointer_table(read, 4 * MOST_INPUTS - 1, pending, 0))
            return 0;
    }
    return 1;
}

/* trace.pending_run(): this thread's pending nodes (its list swept first) as one run of the
   program's loop: (its values, the nodes no view that no other such node reads, through views or
   not, in the order recorded; its views). Python's where the list is another thread's. */
static PyObject *pending_run(PyObject *module, PyObject *unused)
{
    BIND_CHECK();
    if (R.refs == NULL || R.thread != PyThreadState_GetID(PyThreadState_Get()))
        return PyObject_CallNoArgs(S.python_pending_run);
    if (compact_refs(R.refs, refers_to_pending) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(R.refs), inputs = 0;
    for (Py_ssize_t i = 0; i < count; i++) /* alive and pending: compacted so */
        inputs += PyTuple_GET_SIZE(NODE_SLOT(PyWeakref_GetObject(PyList_GET_ITEM(R.refs, i)), INPUTS));
    size_t capacity = 16;
    while (capacity < (size_t)inputs * 4)
        capacity <<= 1;
    PyObject **read = PyMem_Calloc(capacity, sizeof(PyObject *));
    PyObject *values = PyList_New(0), *views = PyList_New(0), *result = NULL;
    if (read == NULL || values == NULL || views == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyWeakref_GetObject(PyList_GET_ITEM(R.refs, i));
        if (is_view(node))
            continue;
        PyObject *node_inputs = NODE_SLOT(node, INPUTS);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(node_inputs); j++) {
            PyObject *source = PyTuple_GET_ITEM(node_inputs, j);
            in_pointer_table(read, capacity - 1, source, 1);
            while (is_view(source) && PyTuple_GET_SIZE(NODE_SLOT(source, INPUTS)) > 0) {
                source = PyTuple_GET_ITEM(NODE_SLOT(source, INPUTS), 0);
                if (in_pointer_table(read, capacity - 1, source, 1))
                    break;
            }
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *node = PyWeakref_GetObject(PyList_GET_ITEM(R.refs, i));
        int view = is_view(node);
        if ((view || !in_pointer_table(read, capacity - 1, node, 0)) && PyList_Append(view ? views : values, node) < 0)
            goto done;
    }
    result = PyTuple_Pack(2, values, views);
done:
    PyMem_Free(read);
    Py_XDECREF(values);
    Py_XDECREF(views);
    return result;
}

/* The position an integer index item (a Python int or NumPy integer) picks along an axis of
   ``extent`` elements, negative ones counted from the end as NumPy counts them: 1 with it in
   ``*at``; 0, no error set, where it is out of bounds or no integer (NumPy's indexing then runs,
   and raises its error). */
static int axis_position(PyObject *item, npy_intp extent, Py_ssize_t *at)
{
    Py_ssize_t position = PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : PyNumber_AsSsize_t(item, NULL);
    if (position == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (position < 0)
        position += extent;
    *at = position;
    return position >= 0 && position < extent;
}

/* The address of the element a full index of Python ints picks in ``values``, as NumPy's own
   integer indexing finds it; NULL where the index is anything else or out of bounds (NumPy's
   indexing then runs, and raises its error). */
static char *element_address(PyArrayObject *values, PyObject *index)
{
    int ndim = PyArray_NDIM(values);
    PyObject *const *items = &index;
    Py_ssize_t count = 1;
    if (PyTuple_CheckExact(index)) {
        items = &PyTuple_GET_ITEM(index, 0);
        count = PyTuple_GET_SIZE(index);
    }
    if (count != ndim || ndim == 0)
        return NULL;
    char *address = PyArray_BYTES(values);
    for (int axis = 0; axis < ndim; axis++) {
        Py_ssize_t at;
        if (!PyLong_CheckExact(items[axis]) || !axis_position(items[axis], PyArray_DIM(values, axis), &at))
            return NULL;
        address += at * PyArray_STRIDE(values, axis);
    }
    return address;
}

/* NumPy's view of ``array`` (an ndarray of a plain dtype, one axis or more) by an index of Python
   ints, NumPy integers, slices, None and at most one Ellipsis, made as NumPy's basic indexing makes
   it (mapping.c's get_view_from_index: the same data, shape, strides, flags and base) without
   NumPy's general parsing of the index, which costs more than the view. NULL without an error
   where the index is anything else, would pick one element (NumPy's scalar), or NumPy would raise:
   NumPy's indexing then runs, and raises its error. Where ``max_size`` is positive and the view
   would hold that many elements or more, it is not made: NULL without an error, ``*too_large`` set. */
static PyObject *basic_view(PyArrayObject *array, PyObject *index, npy_intp max_size, int *too_large)
{
    PyObject *const *items = &index;
    Py_ssize_t count = 1;
    if (PyTuple_CheckExact(index)) {
        items = &PyTuple_GET_ITEM(index, 0);
        count = PyTuple_GET_SIZE(index);
    }
    int ndim = PyArray_NDIM(array), consumed = 0, integers = 0, ellipses = 0, added = 0;
    if (!PyArray_CheckExact(array) || ndim == 0 || !plain_type(PyArray_TYPE(array)) || count > NPY_MAXDIMS)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = items[i];
        if (item == Py_None)
            added++;
        else if (item == Py_Ellipsis)
            ellipses++;
        else if (PySlice_Check(item))
            consumed++;
        else if (PyLong_CheckExact(item) || PyArray_IsScalar(item, Integer))
            consumed++, integers++;
        else
            return NULL;
    }
    if (ellipses > 1 || consumed > ndim || (integers == ndim && added == 0 && ellipses == 0)
        || ndim - integers + added > NPY_MAXDIMS)
        return NULL;
    npy_intp shape[NPY_MAXDIMS], strides[NPY_MAXDIMS];
    char *data = PyArray_BYTES(array);
    int axis = 0, made = 0;
    for (Py_ssize_t i = 0; i <= count; i++) {
        PyObject *item = i < count ? items[i] : Py_Ellipsis; /* the axes left over: an Ellipsis's */
        if (item == Py_None) {
            shape[made] = 1;
            strides[made++] = 0;
        } else if (item == Py_Ellipsis) {
            for (int left = ndim - consumed; left > 0 && axis < ndim; left--, axis++, made++) {
                shape[made] = PyArray_DIM(array, axis);
                strides[made] = PyArray_STRIDE(array, axis);
            }
            consumed = ndim; /* a second pass, at the end, adds none */
        } else {
            npy_intp extent = PyArray_DIM(array, axis), stride = PyArray_STRIDE(array, axis++);
            Py_ssize_t start, stop, step;
            if (PySlice_Check(item)) {
                if (PySlice_Unpack(item, &start, &stop, &step) < 0) {
                    PyErr_Clear();
                    return NULL;
                }
                Py_ssize_t steps = PySlice_AdjustIndices(extent, &start, &stop, step);
                if (steps <= 0) /* NumPy's empty slice starts at the first element */
                    steps = 0, step = 1, start = 0;
                shape[made] = steps;
                strides[made++] = stride * step;
            } else if (!axis_position(item, extent, &start)) {
                return NULL;
            }
            data += stride * start;
        }
    }
    if (max_size > 0) {
        npy_intp size = 1;
        for (int axis = 0; axis < made; axis++)
            size *= shape[axis];
        if (size >= max_size) {
            *too_large = 1;
            return NULL;
        }
    }
    PyArray_Descr *descr = PyArray_DESCR(array);
    Py_INCREF(descr);
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, descr, made, shape, strides, data, PyArray_FLAGS(array), NULL);
    if (view != NULL && PyArray_SetBaseObject((PyArrayObject *)view, Py_NewRef(array)) < 0)
        Py_CLEAR(view);
    return view;
}

/* A tuple index of integer arrays (computed lazy arrays or ndarrays; Python ints among them), one
   for each of ``values``'s leading axes, with each lazy array replaced by its buffer: a new
   reference, and in ``*elements`` the number of elements NumPy's indexing picks (the arrays'
   broadcast size times the axes left). NULL without an error for any other index (a mask, a slice,
   a pending array), or where the arrays do not broadcast (NumPy's indexing then raises). */
static PyObject *index_arrays(PyArrayObject *values, PyObject *index, Py_ssize_t *elements)
{
    if (!PyTuple_CheckExact(index) || PyTuple_GET_SIZE(index) == 0 || PyTuple_GET_SIZE(index) > PyArray_NDIM(values))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(index);
    PyObject *buffers = PyTuple_New(count);
    if (buffers == NULL)
        return NULL;
    npy_intp broadcast[MAX_AXES];
    int ndim = 0, arrays = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyTuple_GET_ITEM(index, i), *node = host_node(item);
        PyObject *used = node != NULL ? NODE_SLOT(node, BUFFER) : item;
        PyTuple_SET_ITEM(buffers, i, Py_NewRef(used));
        if (PyLong_CheckExact(item))
            continue;
        PyArrayObject *array = (PyArrayObject *)used;
        if (!PyArray_CheckExact(used) || !PyTypeNum_ISINTEGER(PyArray_TYPE(array)) || PyArray_NDIM(array) > MAX_AXES)
            goto declined;
        arrays++;
        int axes = PyArray_NDIM(array);
        for (int axis = 0; axis < axes; axis++) { /* aligned at the right, as NumPy broadcasts */
            npy_intp extent = PyArray_DIM(array, axes - 1 - axis);
            if (axis >= ndim || broadcast[axis] == 1)
                broadcast[axis] = extent;
            else if (extent != 1 && extent != broadcast[axis])
                goto declined;
        }
        ndim = axes > ndim ? axes : ndim;
    }
    if (arrays == 0)
        goto declined;
    *elements = 1;
    for (int axis = 0; axis < ndim; axis++)
        *elements *= broadcast[axis];
    for (int axis = (int)count; axis < PyArray_NDIM(values); axis++)
        *elements *= PyArray_DIM(values, axis);
    return buffers;
declined:
    Py_DECREF(buffers);
    return NULL;
}

/* direct.getitem for a computed host array and an index of integers, slices, None and Ellipsis
   (NumPy's scalar, or a small view), a computed mask or index array, or a tuple of index arrays
   (NumPy's indexing, where what it gathers is small). NULL without an error where it does not
   apply. */
static PyObject *read_elements(PyObject *self, PyObject *index)
{
    PyObject *node = host_node(self); /* NULL too where called unbound, on another object */
    if (node == NULL)
        return NULL;
    PyObject *gather = NULL; /* a computed lazy array as the index: NumPy's mask, or a small gather */
    if (Py_IS_TYPE(index, S.array_type)) {
        PyObject *by = host_node(index);
        if (by == NULL)
            return NULL;
        gather = NODE_SLOT(by, BUFFER);
    } else if (!plain_index(index, 1)) {
        Py_ssize_t elements;
        PyObject *arrays = index_arrays((PyArrayObject *)NODE_SLOT(node, BUFFER), index, &elements);
        if (arrays == NULL)
            return NULL;
        /* a gather by several index arrays (``p[rows, labels]``): NumPy's indexing where small, else
           recorded, read by the kernel that consumes it (a limit of 0 is off, -1 an error) */
        Py_ssize_t limit = direct_limit();
        PyObject *gathered = elements < limit ? PyObject_GetItem(NODE_SLOT(node, BUFFER), arrays) : NULL;
        Py_DECREF(arrays);
        return gathered == NULL ? NULL : direct_result(gathered);
    }
    Py_ssize_t limit = direct_limit();
    if (limit <= 0) /* off, or an error set */
        return NULL;
    PyArrayObject *buffer = (PyArrayObject *)NODE_SLOT(node, BUFFER);
    char *element = gather == NULL ? element_address(buffer, index) : NULL;
    if (element != NULL) /* NumPy's scalar of that element, as its integer indexing makes it */
        return PyArray_Scalar(element, PyArray_DESCR(buffer), (PyObject *)buffer);
    if (gather != NULL) {
        PyArrayObject *by = (PyArrayObject *)gather;
        if (PyArray_TYPE(by) == NPY_BOOL && PyArray_NDIM(buffer) > 0 && PyArray_SIZE(buffer) >= limit
            && PyArray_SAMESHAPE(by, buffer))
            return NULL; /* a mask of the array's shape, not small: recorded (record._masked_select) */
        if (PyArray_TYPE(by) != NPY_BOOL && PyArray_NDIM(buffer) > 0 && PyArray_DIM(buffer, 0) > 0
            && PyArray_SIZE(by) * (PyArray_SIZE(buffer) / PyArray_DIM(buffer, 0)) >= limit)
            return NULL; /* a gather of a large result: recorded, read by the kernel that consumes it */
        int type = PyArray_TYPE(by);
        PyObject *gathered = PyTypeNum_ISINTEGER(type) && (PyTypeNum_ISSIGNED(type) || PyArray_ITEMSIZE(by) < 8)
                                     && PyArray_NDIM(buffer) > 0 && PyArray_NDIM(by) > 0
                                 /* NumPy's take: its indexing copies each element apart */
                                 ? PyArray_TakeFrom(buffer, gather, 0, NULL, NPY_RAISE)
                                 : PyObject_GetItem(NODE_SLOT(node, BUFFER), gather);
        return gathered == NULL ? NULL : direct_result(gathered);
    }
    int too_large = 0;
    PyObject *item = basic_view(buffer, index, limit, &too_large);
    if (too_large) /* recorded by the Python method */
        return NULL;
    if (item == NULL && (PyErr_Occurred() || (item = PyObject_GetItem((PyObject *)buffer, index)) == NULL))
        return NULL; /* NumPy's IndexError */
    if (!PyArray_Check(item))
        return item; /* the element */
    PyObject *view = PyArray_SIZE((PyArrayObject *)item) < limit ? direct_view(self, item, 0) : NULL;
    Py_DECREF(item); /* too large: recorded by the Python method */
    return view;
}

/* An operand as NumPy takes it, where it is at hand on the host (direct.host_value): a computed
   lazy array's buffer, an ndarray, a Python or NumPy number (borrowed); NULL otherwise. */
static PyObject *host_operand(PyObject *value)
{
    if (Py_IS_TYPE(value, S.array_type)) {
        PyObject *node = host_node(value);
        return node != NULL ? NODE_SLOT(node, BUFFER) : NULL;
    }
    if (PyFloat_Check(value) || PyLong_Check(value) || PyComplex_Check(value) || PyArray_Check(value)
        || PyObject_TypeCheck(value, (PyTypeObject *)S.numpy_scalar))
        return value;
    return NULL;
}

static int unread(PyArrayObject *buffer);

/* self op= other on a computed host array (a small one unless ``any_size``) whose memory nothing
   pending reads: the op's NumPy ufunc with self's buffer as its output (direct.call_into). The array,
   NULL without an error where it does not apply (a scalar, which the operator rebinds), NULL with
   NumPy's error. */
static PyObject *update_in_place(PyObject *op, PyObject *self, PyObject *other, int any_size)
{
    PyObject *value = host_operand(other), *node = value == NULL ? NULL : any_size ? host_node(self) : small_host_node(self);
    if (node == NULL || is_scalar(self) || !unread((PyArrayObject *)NODE_SLOT(node, BUFFER)))
        return NULL;
    PyObject *reference = op_reference(op);
    if (reference == NULL)
        return NULL;
    PyObject *buffer = NODE_SLOT(node, BUFFER);
    PyObject *call[3] = {buffer, value, buffer}; /* a ufunc's output may be positional */
    PyObject *made = PyArray_Check(buffer) ? loop_now(reference, call, 2, (PyArrayObject *)buffer) : NULL;
    if (made == NULL && !PyErr_Occurred())
        made = PyObject_Vectorcall(reference, call, 3, NULL);
    Py_DECREF(reference);
    if (made == NULL)
        return NULL;
    Py_DECREF(made);
    ran_at_once();
    return Py_NewRef(self);
}

/* ``a @ b`` of two float64 or float32 vectors of one length, as NumPy's matmul computes it: its loop
   calls the dtype's dot function (``DOUBLE_dot``, BLAS's ddot where the strides allow) for a
   row times a column, which this calls without the ufunc's dispatch, several times the dot's own
   cost on the short rows of a loop over a matrix. ``np.dot`` of two vectors calls the same function
   (through its BLAS path, which takes positive strides as they are). NumPy's scalar; NULL without
   an error where the operands are anything else or a floating-point flag was raised (NumPy then
   computes it again and warns as its error state says). */
static PyObject *vector_dot(PyObject *first, PyObject *second)
{
    PyArrayObject *a = (PyArrayObject *)first, *b = (PyArrayObject *)second;
    if (!PyArray_CheckExact(first) || !PyArray_CheckExact(second) || PyArray_NDIM(a) != 1 || PyArray_NDIM(b) != 1
        || PyArray_DIM(a, 0) != PyArray_DIM(b, 0) || PyArray_DIM(a, 0) == 0 || PyArray_DESCR(a) != PyArray_DESCR(b)
        || (PyArray_TYPE(a) != NPY_DOUBLE && PyArray_TYPE(a) != NPY_FLOAT) || !PyArray_ISALIGNED(a)
        || !PyArray_ISALIGNED(b) || !PyArray_ISNOTSWAPPED(a))
        return NULL;
    PyArray_DotFunc *dot = PyDataType_GetArrFuncs(PyArray_DESCR(a))->dotfunc;
    if (dot == NULL)
        return NULL;
    double result[2]; /* room for either type's value, aligned */
    clear_float_flags();
    dot(PyArray_BYTES(a), PyArray_STRIDE(a, 0), PyArray_BYTES(b), PyArray_STRIDE(b, 0), result, PyArray_DIM(a, 0), NULL);
    if (float_flags_raised())
        return NULL;
    tallies[TALLY_DIRECT_LOOPS]++;
    return PyArray_Scalar(result, PyArray_DESCR(a), NULL);
}

/* Whether ``value`` is a vector whose stride np.dot's BLAS path takes as it is (positive): a
   vector of a negative stride it copies first, so BLAS's dot then walks it otherwise. */
static int positive_vector(PyObject *value)
{
    return PyArray_CheckExact(value) && PyArray_NDIM((PyArrayObject *)value) == 1
           && PyArray_STRIDE((PyArrayObject *)value, 0) > 0;
}

/* direct.library_call for a two-operand library call (matmul, dot) on computed host arrays: its reference
   now, whatever the size. NULL without an error where it does not apply. */
static PyObject *library_now(PyObject *op, PyObject *const *operands)
{
    PyObject *first = host_node(operands[0]), *second = host_node(operands[1]);
    if (first == NULL || second == NULL)
        return NULL;
    Py_ssize_t limit = direct_limit();
    if (limit <= 0)
        return NULL;
    PyObject *a = NODE_SLOT(first, BUFFER), *b = NODE_SLOT(second, BUFFER);
    PyObject *product = op == S.matmul || (op == S.dot && positive_vector(a) && positive_vector(b)) ? vector_dot(a, b) : NULL;
    if (product != NULL || PyErr_Occurred())
        return product == NULL ? NULL : direct_result(product);
    return run_direct(op, operands, 2, 0);
}

/* NumPy's attribute ``name`` (a ufunc), kept in ``*kept`` once found: borrowed; NULL without an
   error where it cannot be had (the caller then leaves the call to NumPy). */
static PyObject *numpy_attribute(PyObject **kept, const char *name)
{
    if (*kept == NULL) {
        PyObject *numpy = PyImport_ImportModule("numpy");
        *kept = numpy == NULL ? NULL : PyObject_GetAttrString(numpy, name);
        Py_XDECREF(numpy);
        PyErr_Clear();
    }
    return *kept;
}

/* ---- NumPy's reductions, without NumPy's dispatch ------------------------------------------------

   ``ufunc.reduce`` of a small array (at most NumPy's buffer, ``numpy.getbufsize()``, whose dtype the
   reduction keeps), by NumPy's reduce loop called here as NumPy's reduction calls it, on arrays
   NumPy's iterator walks in C order (strides positive and decreasing). The accumulator starts at
   the ufunc's identity, or, without one, at the first element, which is then skipped. Over every
   axis, one call of the loop adds every element to it in C order (NumPy copies a strided array
   into its buffer first; so does this), a sum's pairwise grouping included; over the last of two
   axes, a call a row, each into its result; over the first, a call a row adding it into every
   result. So the result is NumPy's bit for bit; ``mean`` divides it as NumPy's mean does. Anything
   else, or a floating-point flag raised, declines: NULL without an error, and NumPy computes it. */
enum { REDUCE_NOW_ELEMENTS = 8192 }; /* numpy.getbufsize() */

/* The loop of ``ufunc.reduce`` over ``type_num`` called with these strides of the accumulator and
   the input, where the reduction keeps the dtype; NULL where not (a small integer's sum casts). */
static LoopMemo *reduce_loop(PyObject *ufunc, int type_num, int accumulator_stride, int input_stride)
{
    int kinds[2] = {type_num, type_num}, loop_strides[3] = {accumulator_stride, input_stride, accumulator_stride};
    LoopMemo *memo = loop_for(ufunc, 1, 2, kinds, loop_strides);
    if (memo == NULL || memo->info == NULL)
        return NULL;
    for (int i = 0; i < 3; i++)
        if (memo->descrs[i]->type_num != type_num)
            return NULL;
    return memo;
}

/* ``ufunc.identity`` in the loop's dtype, into ``into``: 1; 0 where the ufunc has none (the first
   element starts the accumulator); -1 where it cannot be written (an error cleared). */
static int reduce_identity(PyObject *ufunc, LoopMemo *memo, char *into)
{
    PyObject *identity = PyObject_GetAttrString(ufunc, "identity");
    int written = identity == NULL ? -1 : identity == Py_None ? 0 : PyArray_Pack(memo->descrs[0], into, identity) < 0 ? -1 : 1;
    Py_XDECREF(identity);
    if (written < 0)
        PyErr_Clear();
    return written;
}

/* The loop over ``count`` elements from ``first`` (``step`` apart) into the accumulator at
   ``into``: skipping the first where it started the accumulator. Nonzero where the loop failed. */
static int reduce_run(LoopMemo *memo, char *into, char *first, npy_intp count, npy_intp step, int skip_first)
{
    if (skip_first) {
        memcpy(into, first, PyDataType_ELSIZE(memo->descrs[1]));
        first += step;
        count--;
    }
    npy_intp steps[3] = {0, step, 0};
    char *data[3] = {into, first, into};
    return count > 0 && memo->info->loop(memo->info->context, data, &count, steps, memo->info->auxdata) != 0;
}

/* NumPy's mean from its sum, in place: the sum over the count (an intp, so in float64), stored in
   the array's dtype (float64 or float32). */
static void mean_of_sum(char *value, int type_num, npy_intp count)
{
    if (type_num == NPY_DOUBLE)
        *(double *)value /= (double)count;
    else
        *(float *)value = (float)((double)*(float *)value / (double)count);
}

/* The axes of more than one element of an array NumPy walks in C order (strides positive and
   decreasing), in ``dims`` and ``strides``, ``reduced`` saying which is ``axis`` (-1: none); their
   number, or -1 for another layout, dtype or size. */
static int walked_axes(PyArrayObject *array, int axis, npy_intp *dims, npy_intp *strides, int *reduced, int mean)
{
    npy_intp size = PyArray_SIZE(array);
    int type_num = PyArray_TYPE(array), axes = 0;
    if (!PyArray_CheckExact(array) || !plain_array(array) || size == 0 || size > REDUCE_NOW_ELEMENTS
        || PyArray_ITEMSIZE(array) > (npy_intp)sizeof(npy_cdouble)
        || (mean && type_num != NPY_DOUBLE && type_num != NPY_FLOAT))
        return -1;
    *reduced = -1;
    for (int position = 0; position < PyArray_NDIM(array); position++) {
        npy_intp extent = PyArray_DIM(array, position), stride = PyArray_STRIDE(array, position);
        if (extent == 1)
            continue;
        if (stride <= 0 || (axes > 0 && stride >= strides[axes - 1]))
            return -1;
        if (position == axis)
            *reduced = axes;
        dims[axes] = extent;
        strides[axes++] = stride;
    }
    return axes;
}

static npy_cdouble gathered[REDUCE_NOW_ELEMENTS]; /* the elements of a strided array, in C order */

/* The elements of ``array`` (laid out as walked_axes takes) as one run NumPy's iterator walks: the
   first, in ``*first``, and the step between them, the array's own where its axes merge into one,
   else ``gathered``'s, which then holds them in C order, as NumPy's buffer would. */
static void one_run(PyArrayObject *array, npy_intp *dims, npy_intp *strides, int axes, char **first, npy_intp *step)
{
    npy_intp itemsize = PyArray_ITEMSIZE(array), size = PyArray_SIZE(array);
    for (int axis = axes - 1; axis > 0; axis--) /* merged with the axis before where contiguous with it */
        if (strides[axis - 1] == strides[axis] * dims[axis]) {
            dims[axis - 1] *= dims[axis];
            strides[axis - 1] = strides[axis];
            for (int later = axis; later < axes - 1; later++) {
                dims[later] = dims[later + 1];
                strides[later] = strides[later + 1];
            }
            axes--;
        }
    *first = PyArray_BYTES(array);
    *step = axes == 0 ? itemsize : strides[0];
    if (axes > 1) { /* gathered a row at a time, in C order */
        npy_intp count = dims[axes - 1], rows = size / count, index[NPY_MAXDIMS] = {0};
        char *into = (char *)gathered;
        for (npy_intp row = 0; row < rows; row++) {
            char *from = *first;
            for (int axis = 0; axis < axes - 1; axis++)
                from += index[axis] * strides[axis];
            for (npy_intp i = 0; i < count; i++, into += itemsize)
                memcpy(into, from + i * strides[axes - 1], itemsize);
            for (int axis = axes - 2; axis >= 0 && ++index[axis] == dims[axis]; axis--)
                index[axis] = 0;
        }
        *first = (char *)gathered;
        *step = itemsize;
    }
}

/* ``ufunc.reduce(array)`` over every axis (see above) into ``into``, the mean where ``mean``, with
   the floating-point flags cleared first for the caller to read; the run of elements it read, in
   ``*first`` and ``*step``. The loop's memo entry; NULL where it declines (no error set). */
static LoopMemo *reduce_whole(PyObject *ufunc, PyArrayObject *array, int mean, ScalarValue *into, char **first,
                              npy_intp *step)
{
    npy_intp dims[NPY_MAXDIMS], strides[NPY_MAXDIMS], size = PyArray_SIZE(array);
    int reduced, axes = walked_axes(array, -1, dims, strides, &reduced, mean);
    if (axes < 0)
        return NULL;
    one_run(array, dims, strides, axes, first, step);
    int type_num = PyArray_TYPE(array);
    LoopMemo *memo = reduce_loop(ufunc, type_num, STRIDE_ZERO, *step == PyArray_ITEMSIZE(array) ? STRIDE_ITEM : STRIDE_OTHER);
    int started = memo == NULL ? -1 : reduce_identity(ufunc, memo, into->bytes);
    if (started < 0)
        return NULL;
    clear_float_flags();
    if (reduce_run(memo, into->bytes, *first, size, *step, !started) || PyErr_Occurred()) {
        PyErr_Clear(); /* NumPy computes it again, and raises as it does */
        return NULL;
    }
    if (mean)
        mean_of_sum(into->bytes, type_num, size);
    return memo;
}

/* ``ufunc.reduce(array)`` over every axis: NumPy's scalar. */
static PyObject *reduce_loop_now(PyObject *ufunc, PyArrayObject *array, int mean)
{
    ScalarValue accumulator;
    char *first;
    npy_intp step;
    LoopMemo *memo = reduce_whole(ufunc, array, mean, &accumulator, &first, &step);
    if (memo == NULL || float_flags_raised()) /* NumPy computes it again, and warns as its error state says */
        return NULL;
    tallies[TALLY_DIRECT_LOOPS]++;
    return PyArray_Scalar(accumulator.bytes, memo->descrs[0], NULL);
}

/* ``array.var(ddof=ddof)``, or its ``std``, of a float64 or float32 array: NumPy's scalar, by the
   steps of NumPy's ``_var``: the mean as ``mean`` computes it, each element's deviation squared in
   the array's dtype (a fresh array, C-contiguous), their sum by the reduce loop (one pairwise
   sum), over the count less ``ddof`` as NumPy divides it (through float64), the square root in
   the dtype. A count not above ``ddof`` (NumPy warns), or a floating-point flag raised, declines. */
static PyObject *moments_now(PyArrayObject *array, Py_ssize_t ddof, int std)
{
    static PyObject *kept_add;
    npy_intp size = PyArray_SIZE(array), itemsize = PyArray_ITEMSIZE(array), step;
    PyObject *add = ddof < 0 || ddof >= size ? NULL : numpy_attribute(&kept_add, "add");
    ScalarValue total, squares;
    char *first;
    if (add == NULL || reduce_whole(add, array, 1, &total, &first, &step) == NULL) /* the mean */
        return NULL;
    int type_num = PyArray_TYPE(array), single = type_num == NPY_FLOAT;
    for (npy_intp i = 0; i < size; i++) { /* into ``gathered``, over what it held: each read first */
        char *element = first + i * step;
        if (single) {
            float deviation = *(float *)element - total.single;
            ((float *)gathered)[i] = deviation * deviation;
        } else {
            double deviation = *(double *)element - total.real;
            ((double *)gathered)[i] = deviation * deviation;
        }
    }
    /* The squares' loop (their run is contiguous), looked up once the mean's is used: a lookup may
       take the memo entry the first was in */
    LoopMemo *memo = reduce_loop(add, type_num, STRIDE_ZERO, STRIDE_ITEM);
    int failed = memo == NULL || reduce_identity(add, memo, squares.bytes) != 1
                 || reduce_run(memo, squares.bytes, (char *)gathered, size, itemsize, 0);
    if (failed || PyErr_Occurred() || float_flags_raised()) {
        PyErr_Clear();
        return NULL;
    }
    mean_of_sum(squares.bytes, type_num, size - ddof);
    if (std && single)
        squares.single = sqrtf(squares.single);
    else if (std)
        squares.real = sqrt(squares.real);
    tallies[TALLY_DIRECT_LOOPS]++;
    return PyArray_Scalar(squares.bytes, memo->descrs[0], NULL);
}

/* ``ufunc.reduce(array, axis, keepdims=keepdims)``: NumPy's array (see above), for an array of at
   most two axes of more than one element, ``axis`` one of them. */
static PyObject *axis_reduce_now(PyObject *ufunc, PyArrayObject *array, int axis, int keepdims, int mean)
{
    npy_intp dims[NPY_MAXDIMS], strides[NPY_MAXDIMS], itemsize = PyArray_ITEMSIZE(array);
    int ndim = PyArray_NDIM(array), reduced;
    if (axis < -ndim || axis >= ndim)
        return NULL; /* NumPy's AxisError */
    axis = axis < 0 ? axis + ndim : axis;
    int axes = walked_axes(array, axis, dims, strides, &reduced, mean);
    if (axes < 1 || axes > 2 || reduced < 0)
        return NULL; /* more axes, or a reduction over one element: NumPy's */
    npy_intp shape[NPY_MAXDIMS];
    int kept = 0;
    for (int position = 0; position < ndim; position++)
        if (position != axis || keepdims)
            shape[kept++] = position == axis ? 1 : PyArray_DIM(array, position);
    int type_num = PyArray_TYPE(array), outer = axes == 2 && reduced == 0;
    npy_intp inner_stride = strides[axes - 1];
    LoopMemo *memo = reduce_loop(ufunc, type_num, outer ? STRIDE_ITEM : STRIDE_ZERO,
                                 inner_stride == itemsize ? STRIDE_ITEM : STRIDE_OTHER);
    if (memo == NULL)
        return NULL;
    PyArray_Descr *descr = memo->descrs[0];
    Py_INCREF(descr);
    PyArrayObject *result = (PyArrayObject *)PyArray_NewFromDescr(&PyArray_Type, descr, kept, shape, NULL, NULL, 0, NULL);
    if (result == NULL)
        return NULL;
    char *out = PyArray_BYTES(result), *first = PyArray_BYTES(array);
    npy_intp results = PyArray_SIZE(result), count = dims[axes - 1];
    int started = reduce_identity(ufunc, memo, out), failed = started < 0;
    for (npy_intp i = 1; started > 0 && i < results; i++)
        memcpy(out + i * itemsize, out, itemsize);
    clear_float_flags();
    if (!outer) { /* over the last axis: each row into its result */
        for (npy_intp row = 0; row < results && !failed; row++)
            failed = reduce_run(memo, out + row * itemsize, first + (axes == 2 ? row * strides[0] : 0), count,
                                inner_stride, !started);
    } else { /* over the first: each row added into every result, the first copied where no identity */
        npy_intp steps[3] = {itemsize, inner_stride, itemsize};
        for (npy_intp row = 0; row < dims[0] && !failed; row++) {
            char *data[3] = {out, first + row * strides[0], out};
            if (row == 0 && !started) {
                for (npy_intp i = 0; i < count; i++)
                    memcpy(out + i * itemsize, data[1] + i * inner_stride, itemsize);
                continue;
            }
            failed = memo->info->loop(memo->info->context, data, &count, steps, memo->info->auxdata) != 0;
        }
    }
    if (failed || PyErr_Occurred() || float_flags_raised()) {
        PyErr_Clear();
        Py_DECREF(result);
        return NULL;
    }
    for (npy_intp i = 0; mean && i < results; i++)
        mean_of_sum(out + i * itemsize, type_num, dims[reduced]);
    tallies[TALLY_DIRECT_LOOPS]++;
    return PyArray_Return(result); /* a 0-d result as NumPy's scalar */
}

/* The ufunc whose reduce a reduction of this name is, and whether it is a mean; NULL for another. */
static PyObject *reducing_ufunc(PyObject *name, int *mean)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "mean"};
    static const char *const ufunc_names[] = {"add", "multiply", "maximum", "minimum", "add"};
    static PyObject *ufuncs[5];
    for (int i = 0; i < 5; i++) {
        if (PyUnicode_CompareWithASCIIString(name, names[i]) != 0)
            continue;
        *mean = i == 4;
        return numpy_attribute(&ufuncs[i], ufunc_names[i]);
    }
    return NULL;
}

/* A reduction's axis, an int or None, into ``*axis`` (NO_AXIS: None): 1; 0 for another value,
   which NumPy's call refuses or takes (a tuple). */
enum { NO_AXIS = INT_MIN };
static int reduction_axis(PyObject *value, int *axis)
{
    if (value == Py_None) {
        *axis = NO_AXIS;
        return 1;
    }
    long given = PyLong_CheckExact(value) ? PyLong_AsLong(value) : -1;
    if (!PyLong_CheckExact(value) || PyErr_Occurred() || given < -NPY_MAXDIMS || given >= NPY_MAXDIMS) {
        PyErr_Clear(); /* NumPy's error, from its own call */
        return 0;
    }
    *axis = (int)given;
    return 1;
}

/* The common arguments of a reduction, the axis given by position (``positional``, or NULL) or
   by keyword, ``keepdims`` (a bool) and ``ddof`` (an int), whose values follow in ``values``: read
   into ``*axis``, ``*keepdims`` and ``*ddof`` (NO_DDOF: not given): 1; 0 where another argument
   or value is given. */
#define NO_DDOF PY_SSIZE_T_MIN
static int reduction_arguments(PyObject *positional, PyObject *const *values, PyObject *kwnames, int *axis,
                               int *keepdims, Py_ssize_t *ddof)
{
    *axis = NO_AXIS;
    *keepdims = 0;
    *ddof = NO_DDOF;
    if (positional != NULL && !reduction_axis(positional, axis))
        return 0;
    for (Py_ssize_t i = 0; kwnames != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i), *value = values[i];
        if (PyUnicode_CompareWithASCIIString(name, "keepdims") == 0 && PyBool_Check(value)) {
            *keepdims = value == Py_True;
        } else if (PyUnicode_CompareWithASCIIString(name, "ddof") == 0 && PyLong_CheckExact(value)) {
            *ddof = PyLong_AsSsize_t(value);
            if ((*ddof == -1 && PyErr_Occurred()) || *ddof == NO_DDOF) {
                PyErr_Clear();
                return 0;
            }
        } else if (positional != NULL || PyUnicode_CompareWithASCIIString(name, "axis") != 0
                   || !reduction_axis(value, axis)) {
            return 0; /* another argument, or the axis twice: NumPy's TypeError */
        }
    }
    return 1;
}

/* x.sum(axis=..., keepdims=...) and the other reductions of a small computed host array, given
   at most the axis by position and only the keywords ``axis``, ``dtype``, ``keepdims`` and ``ddof``:
   NumPy's reduce loop where it can (reduce_loop_now, axis_reduce_now), else the ndarray's method of
   the reduction's name, now (direct.reduce). NULL without an error where it does not apply. */
static PyObject *reduce_now(PyObject *op, PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const allowed[] = {"axis", "dtype", "keepdims", "ddof", NULL};
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs != 1 && nargs != 2)
        return NULL;
    for (Py_ssize_t i = 0; i < keywords; i++) {
        int known = 0;
        for (int j = 0; allowed[j] != NULL && !known; j++)
            known = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), allowed[j]) == 0;
        if (!known)
            return NULL;
    }
    PyObject *node = small_host_node(self); /* NULL too where called unbound, on another object */
    if (node == NULL)
        return NULL;
    /* The ndarray's method of the op's name, as NumPy's ``x.sum()`` (its function adds a dispatch) */
    PyObject *name = PyObject_GetAttr(op, S.str_name);
    if (name == NULL)
        return NULL;
    PyObject *call[6] = {NODE_SLOT(node, BUFFER)};
    int mean = 0, axis, keepdims;
    Py_ssize_t ddof;
    PyObject *ufunc = reducing_ufunc(name, &mean), *reduced = NULL;
    int std = PyUnicode_CompareWithASCIIString(name, "std") == 0;
    int moments = std || PyUnicode_CompareWithASCIIString(name, "var") == 0;
    PyArrayObject *values = (PyArrayObject *)call[0];
    if ((ufunc != NULL || moments)
        && reduction_arguments(nargs == 2 ? args[1] : NULL, args + nargs, kwnames, &axis, &keepdims, &ddof)) {
        if (moments)
            reduced = axis == NO_AXIS && !keepdims ? moments_now(values, ddof == NO_DDOF ? 0 : ddof, std) : NULL;
        else if (ddof == NO_DDOF) /* ddof given to another reduction: NumPy's TypeError */
            reduced = axis == NO_AXIS && !keepdims ? reduce_loop_now(ufunc, values, mean)
                      : axis == NO_AXIS            ? NULL
                                                   : axis_reduce_now(ufunc, values, axis, keepdims, mean);
    }
    if (reduced != NULL || PyErr_Occurred()) {
        Py_DECREF(name);
        return reduced == NULL ? NULL : direct_result(reduced);
    }
    for (Py_ssize_t i = 1; i < nargs + keywords; i++) /* the axis given by position, then the keywords */
        call[i] = args[i];
    PyObject *made = PyObject_VectorcallMethod(name, call, nargs, kwnames);
    Py_DECREF(name);
    return made == NULL ? NULL : direct_result(made);
}

/* The bytes an array's elements span, [*low, *high): 0 for an array of no elements. */
static int byte_span(PyArrayObject *array, char **low, char **high)
{
    if (PyArray_SIZE(array) == 0)
        return 0;
    char *start = PyArray_BYTES(array), *end = start + PyArray_ITEMSIZE(array);
    for (int axis = 0; axis < PyArray_NDIM(array); axis++) {
        Py_ssize_t reach = PyArray_STRIDE(array, axis) * (PyArray_DIM(array, axis) - 1);
        if (reach < 0)
            start += reach;
        else
            end += reach;
    }
    *low = start;
    *high = end;
    return 1;
}

/* Whether a pending node of any thread reads a host leaf whose memory may overlap the bytes from
   ``low`` up to ``high`` (the bounds test of np.may_share_memory, as trace.pending_readers asks
   it): 1, 0, or -1 where that is not told here (a leaf that is no NumPy array), no error set. This
   thread's list is swept first. */
static int pending_reads(char *low, char *high)
{
    char *other_low, *other_high;
    if (R.refs != NULL && R.thread == PyThreadState_GetID(PyThreadState_Get())
        && compact_refs(R.refs, refers_to_pending) < 0) {
        PyErr_Clear();
        return -1;
    }
    PyObject *recordings = SLOT(S.pending, S.recordings_offset);
    if (recordings == NULL || !PyList_CheckExact(recordings))
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(recordings); i++) {
        PyObject *recording = PyList_GET_ITEM(recordings, i);
        PyObject *refs = Py_TYPE(recording) == S.recording_type ? SLOT(recording, S.refs_offset) : NULL;
        if (refs == NULL || !PyList_CheckExact(refs))
            return -1;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(refs); j++) {
            PyObject *node = pending_referent(PyList_GET_ITEM(refs, j));
            if (node == NULL)
                continue;
            PyObject *inputs = NODE_SLOT(node, INPUTS);
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(inputs); k++) {
                PyObject *source = PyTuple_GET_ITEM(inputs, k);
                if (NODE_SLOT(source, OP) != S.buffer_op)
                    continue;
                PyObject *device = NODE_SLOT(source, DEVICE), *leaf = NODE_SLOT(source, BUFFER);
                if (device != S.host && device != Py_None)
                    continue; /* another memory's */
                if (leaf == NULL || !PyArray_Check(leaf))
                    return -1;
                if (byte_span((PyArrayObject *)leaf, &other_low, &other_high) && other_low < high && low < other_high)
                    return 1;
            }
        }
    }
    return 0;
}

/* Whether no pending node reads the bytes from ``low`` up to ``high``: nothing pending, or
   pending_reads finds none (where it cannot tell, one may). */
static int unread_span(char *low, char *high)
{
    return nothing_pending() || pending_reads(low, high) == 0;
}

/* unread_span, for the memory ``buffer`` may share (an empty array's: none). */
static int unread(PyArrayObject *buffer)
{
    char *low, *high;
    return !byte_span(buffer, &low, &high) || unread_span(low, high);
}

/* trace.reads_nothing(memory): unread, for the host array ``memory``; for another kind of array,
   nothing_pending_swept. */
static PyObject *reads_nothing(PyObject *module, PyObject *memory)
{
    BIND_CHECK();
    if (!PyArray_Check(memory))
        return nothing_pending_swept(module, NULL);
    return PyBool_FromLong(unread((PyArrayObject *)memory));
}

/* x[index] = value into a computed host array where no pending node reads the memory written:
   NumPy's assignment (direct.setitem), through a plain index or a computed lazy array (a mask, an index array). 1
   written, 0 where it does not apply, -1 with NumPy's error. */
static int write_elements(PyObject *self, PyObject *index, PyObject *value)
{
    PyObject *node = host_node(self); /* NULL too where called unbound, on another object */
    if (node == NULL || is_scalar(self) || (Py_IS_TYPE(value, S.array_type) && is_scalar(value)))
        return 0; /* a scalar takes no item, and is written as a scalar: record.setitem */
    if (Py_IS_TYPE(index, S.array_type)) {
        PyObject *index_node = host_node(index);
        if (index_node == NULL)
            return 0;
        index = NODE_SLOT(index_node, BUFFER);
    } else if (!plain_index(index, 1)) {
        /* a scatter by several index arrays (``grad[rows, labels] = v``): NumPy's, at any size */
        Py_ssize_t elements;
        PyObject *arrays = index_arrays((PyArrayObject *)NODE_SLOT(node, BUFFER), index, &elements);
        if (arrays == NULL || (value = host_operand(value)) == NULL) {
            Py_XDECREF(arrays);
            return 0;
        }
        Py_ssize_t limit = direct_limit();
        int written = limit <= 0 ? (int)limit : 0; /* off (0), or an error (-1) */
        if (limit > 0 && unread((PyArrayObject *)NODE_SLOT(node, BUFFER)))
            written = PyObject_SetItem(NODE_SLOT(node, BUFFER), arrays, value) < 0 ? -1 : 1;
        Py_DECREF(arrays);
        return written;
    }
    if ((value = host_operand(value)) == NULL)
        return 0;
    Py_ssize_t limit = direct_limit();
    if (limit <= 0)
        return limit == 0 ? 0 : -1;
    /* Only what reads the memory written must be computed first (record.setitem does that): a
       sweep's pending statement that reads the row before keeps waiting while this row is written */
    PyArrayObject *buffer = (PyArrayObject *)NODE_SLOT(node, BUFFER);
    char *element = PyArray_ISWRITEABLE(buffer) && PySet_Contains(S.scalars, (PyObject *)Py_TYPE(value)) == 1
                        ? element_address(buffer, index)
                        : NULL;
    if (element != NULL) { /* a scalar into one element: packed as NumPy's integer indexing does */
        if (!unread_span(element, element + PyArray_ITEMSIZE(buffer)))
            return 0;
        return PyArray_Pack(PyArray_DESCR(buffer), element, value) < 0 ? -1 : 1;
    }
    PyObject *view = PyArray_ISWRITEABLE(buffer) ? basic_view(buffer, index, 0, NULL) : NULL;
    if (view != NULL) { /* NumPy's assignment through a view: its copy into the view NumPy makes */
        int written = !unread((PyArrayObject *)view) ? 0 : PyArray_CopyObject((PyArrayObject *)view, value) < 0 ? -1 : 1;
        Py_DECREF(view);
        return written;
    }
    if (PyErr_Occurred() || !unread(buffer))
        return PyErr_Occurred() ? -1 : 0;
    return PyObject_SetItem((PyObject *)buffer, index, value) < 0 ? -1 : 1;
}

static PyObject *replay_now(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
static PyObject *replay_group_now(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The configured backend's name (a new reference) where its kernels run on the host, as
   execute._replayed_in_c asks; NULL without an error elsewhere. */
static PyObject *host_backend_name(void)
{
    PyObject *names = PyModule_GetDict(S.registry_module); /* borrowed */
    PyObject *name = PyDict_GetItemWithError(names, S.str_backend);
    PyObject *backends = name == NULL ? NULL : PyDict_GetItemWithError(names, S.str_backends);
    PyObject *backend = backends == NULL || !PyDict_Check(backends) ? NULL : PyDict_GetItemWithError(backends, name);
    if (backend == NULL || backend == Py_None)
        return NULL;
    PyObject *memory = PyObject_GetAttr(backend, S.str_memory);
    int on_host = memory == S.host;
    Py_XDECREF(memory);
    return on_host ? PyObject_GetAttr(backend, S.str_name) : NULL;
}

/* The node of ``value`` (borrowed) where it is a lazy array, no scalar, whose node is pending;
   NULL otherwise. */
static PyObject *pending_value_node(PyObject *value)
{
    if (!Py_IS_TYPE(value, S.array_type) || is_scalar(value))
        return NULL;
    PyObject *node = ARRAY_SLOT(value, ARRAY_NODE);
    if (node == NULL || !PyObject_TypeCheck(node, S.node_type))
        return NULL;
    PyObject *inputs = NODE_SLOT(node, INPUTS);
    return inputs != NULL && PyTuple_CheckExact(inputs) && PyTuple_GET_SIZE(inputs) > 0 ? node : NULL;
}

/* ``replay`` (replay_now, or replay_group_now) of ``members`` by the host backend, under
   execute.lock: 1 computed, 0 not (no host backend, or no launch kept: the Python path computes
   it), -1 with an error. */
static int replayed_under_lock(PyObject *(*replay)(PyObject *, PyObject *const *, Py_ssize_t), PyObject *members)
{
    PyObject *backend = host_backend_name();
    if (backend == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *locked = PyObject_CallMethodNoArgs(S.lock, S.str_acquire);
    if (locked == NULL) {
        Py_DECREF(backend);
        return -1;
    }
    Py_DECREF(locked);
    PyObject *replay_args[3] = {members, backend, S.replays};
    PyObject *replayed = replay(NULL, replay_args, 3);
    Py_DECREF(backend);
    int computed = replayed == NULL ? -1 : replayed == Py_True;
    Py_XDECREF(replayed);
    PyObject *type, *error, *traceback; /* the replay's error, kept while the lock is released */
    PyErr_Fetch(&type, &error, &traceback);
    PyObject *released = PyObject_CallMethodNoArgs(S.lock, S.str_release);
    if (released == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(error);
        Py_XDECREF(traceback);
        return -1;
    }
    Py_DECREF(released);
    PyErr_Restore(type, error, traceback);
    /* what the replay computed leaves this thread's list of pending nodes, which nothing_pending reads */
    if (computed > 0 && R.refs != NULL && R.thread == PyThreadState_GetID(PyThreadState_Get())
        && compact_refs(R.refs, refers_to_pending) < 0)
        return -1;
    return computed;
}

/* Whether ``value`` is a pending host lazy array, no view, that the launch its structure kept has
   now computed (execute.materialize's common case: replay_now, under execute.lock): 1 computed; 0
   not (not such a value, or no launch kept: the Python path computes it); -1 with an error. */
static int replayed_pending(PyObject *value)
{
    PyObject *pending = pending_value_node(value);
    if (pending == NULL || NODE_SLOT(pending, DEVICE) != S.host || is_view(pending))
        return 0;
    if (profile_hook == NULL)
        return replayed_under_lock(replay_now, pending);
    profiled(2, pending); /* held by ``value`` throughout */
    int computed = replayed_under_lock(replay_now, pending);
    profiled(3, computed > 0 ? Py_True : Py_False);
    return computed;
}

/* Whether the run of the program's loop that this thread has pending was computed by the launch
   its structure kept (execute.materialize of nothing, while sites' recordings are pending:
   replay_group_now of no members takes the run): as replayed_pending. */
static int replayed_run(void)
{
    if (profile_hook != NULL)
        return 0;
    PyObject *none = PyTuple_New(0);
    if (none == NULL)
        return -1;
    int computed = replayed_under_lock(replay_group_now, none);
    Py_DECREF(none);
    return computed;
}

/* self op= other through ``self``, a pending view (one view op) of a computed host array, by a
   pending host value whose launch is kept, over fewer elements than record.operator_into_region_limit
   gives (``ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])`` on a grid of a few hundred squared): the
   value replayed, the view taken as NumPy takes it (execute.take_views), then the op's ufunc writes
   the region, as record._into_computed_region does, with no Python frame but the view's. The
   array; NULL without an error where this does not apply (the Python path then runs), NULL with an
   error. */
static PyObject *update_view_in_place(PyObject *op, PyObject *self, PyObject *other)
{
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE);
    if (node == NULL || !PyObject_TypeCheck(node, S.node_type) || is_scalar(self) || !is_view(node))
        return NULL;
    PyObject *inputs = NODE_SLOT(node, INPUTS), *shape = NODE_SLOT(node, SHAPE);
    if (inputs == NULL || !PyTuple_CheckExact(inputs) || PyTuple_GET_SIZE(inputs) != 1
        || !computed_on_host(PyTuple_GET_ITEM(inputs, 0)) || shape == NULL || !PyTuple_CheckExact(shape)
        || pending_value_node(other) == NULL)
        return NULL;
    Py_ssize_t size = shape_size(shape);
    PyObject *limit = size < 0 ? NULL : PyObject_CallNoArgs(S.operator_into_region_limit);
    if (limit == NULL)
        return NULL;
    Py_ssize_t most = PyLong_AsSsize_t(limit);
    Py_DECREF(limit);
    if (most == -1 && PyErr_Occurred())
        return NULL;
    if (size >= most || replayed_pending(other) <= 0)
        return NULL;
    PyObject *views = PyList_New(1);
    if (views == NULL)
        return NULL;
    PyList_SET_ITEM(views, 0, Py_NewRef(node));
    PyObject *taken = PyObject_CallOneArg(S.take_views, views);
    Py_DECREF(views);
    if (taken == NULL)
        return NULL;
    Py_DECREF(taken);
    return update_in_place(op, self, other, 1);
}

/* record.can_rebind: no alias can observe ``array``'s memory (no base, no live view, and where it
   holds a buffer, neither handed to NumPy nor viewed by a NumPy array), so a write may replace its
   node. -1 with an error. */
static int can_rebind(PyObject *array)
{
    PyObject *base = ARRAY_SLOT(array, ARRAY_BASE), *refs = ARRAY_SLOT(array, ARRAY_VIEWS);
    PyObject *node = ARRAY_SLOT(array, ARRAY_NODE);
    if ((base != NULL && base != Py_None) || node == NULL || !PyObject_TypeCheck(node, S.node_type))
        return 0;
    if (refs != NULL && refs != Py_None) {
        if (!PyList_CheckExact(refs))
            return 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(refs); i++)
            if (is_alive(PyList_GET_ITEM(refs, i)))
                return 0;
    }
    if (NODE_SLOT(node, OP) != S.buffer_op)
        return 1;
    if (NODE_SLOT(node, EXPOSED) != Py_False)
        return 0;
    PyObject *viewed = viewed_by_numpy(NULL, node);
    if (viewed == NULL)
        return -1;
    Py_DECREF(viewed);
    return viewed == Py_False;
}

/* self op= other where ``self`` is a whole array no alias can observe and the operator did not
   write it in place (``self`` or ``other`` pending, ``self`` large, or read by pending nodes): the
   op recorded as ``self op other`` (or run at once, as that records it) and ``self`` rebound to
   it, as record.assign does, so the statement fuses with what reads ``self`` next and its
   operator runs no Python frame. The array; NULL without an error where this does not apply (a
   cast, a result of another shape, another device, an operand record_common declines: the Python
   method then runs and raises or casts as NumPy does), NULL with an error. */
static PyObject *rebound_in_place(PyObject *op, PyObject *self, PyObject *other)
{
    if (!Py_IS_TYPE(self, S.array_type) || is_scalar(self))
        return NULL;
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE);
    if (node == NULL || !PyObject_TypeCheck(node, S.node_type))
        return NULL;
    if (Py_IS_TYPE(other, S.array_type)) {
        PyObject *other_node = ARRAY_SLOT(other, ARRAY_NODE);
        if (other_node == NULL || !PyObject_TypeCheck(other_node, S.node_type)
            || NODE_SLOT(node, DEVICE) != NODE_SLOT(other_node, DEVICE))
            return NULL;
    }
    int rebindable = can_rebind(self);
    if (rebindable <= 0)
        return NULL;
    PyObject *operands[3] = {op, self, other};
    PyObject *recorded = record_common_placed(operands, 3, self);
    if (recorded == NULL || recorded == Py_None) {
        Py_XDECREF(recorded);
        return NULL;
    }
    set_slot(self, S.array_offsets[ARRAY_NODE], Py_NewRef(ARRAY_SLOT(recorded, ARRAY_NODE)));
    Py_DECREF(recorded);
    return Py_NewRef(self);
}

/* Whether a write into ``self`` (a write of ``value``, or an in-place operator by it) goes by the
   C paths once ``value`` is computed: a computed host array, no scalar, and a pending value, one of
   them with fewer elements than direct execution takes (a row of a large array written in a
   sweep); -1 with an error. Above the direct limit the value's kernel may write the region itself
   (record._write_in_place). */
static int small_write_of_pending(PyObject *self, PyObject *value)
{
    PyObject *pending = pending_value_node(value);
    if (pending == NULL || is_scalar(self))
        return 0;
    if (small_host_node(self) != NULL)
        return 1;
    if (PyErr_Occurred() || host_node(self) == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t size = shape_size(NODE_SLOT(pending, SHAPE)), limit = size < 0 ? -1 : direct_limit();
    return limit < 0 ? -1 : size < limit;
}

/* The node of ``value`` where these paths record on it (borrowed): a LazyArray's node whose shape
   is a tuple of at most MAX_AXES ints, read into ``extents`` and ``*ndim``; else NULL. That is a
   pending node, or a computed one that direct execution leaves to recording (large, on a device, or
   direct execution off): a small computed array is the Python function's, which runs NumPy at once. */
static PyObject *pending_node(PyObject *value, Py_ssize_t *extents, Py_ssize_t *ndim)
{
    if (!S.bound || !Py_IS_TYPE(value, S.array_type))
        return NULL;
    PyObject *node = ARRAY_SLOT(value, ARRAY_NODE);
    if (node == NULL || !PyObject_TypeCheck(node, S.node_type))
        return NULL;
    PyObject *inputs = NODE_SLOT(node, INPUTS), *shape = NODE_SLOT(node, SHAPE);
    if (inputs == NULL || !PyTuple_CheckExact(inputs) || shape == NULL || !PyTuple_CheckExact(shape)
        || PyTuple_GET_SIZE(shape) > MAX_AXES || NODE_SLOT(node, DTYPE) == NULL)
        return NULL;
    *ndim = PyTuple_GET_SIZE(shape);
    Py_ssize_t size = 1;
    for (Py_ssize_t axis = 0; axis < *ndim; axis++) {
        if (!int_value(PyTuple_GET_ITEM(shape, axis), &extents[axis]) || extents[axis] < 0)
            return NULL;
        size *= extents[axis];
    }
    if (PyTuple_GET_SIZE(inputs) == 0) {
        if (NODE_SLOT(node, OP) != S.buffer_op)
            return NULL;
        if (NODE_SLOT(node, DEVICE) == S.host) {
            Py_ssize_t limit = direct_limit();
            if (limit < 0) {
                PyErr_Clear(); /* the Python function meets the same error, and raises it */
                return NULL;
            }
            if (size < limit)
                return NULL;
        }
    }
    return node;
}

/* An int, or a tuple of ints, as ``count`` items at ``*items`` (``*value`` itself for an int):
   1, else 0. The items are checked as they are read. */
static int int_items(PyObject *const *value, PyObject *const **items, Py_ssize_t *count)
{
    if (PyTuple_CheckExact(*value)) {
        *items = ((PyTupleObject *)*value)->ob_item;
        *count = PyTuple_GET_SIZE(*value);
        return *count <= MAX_AXES;
    }
    *items = value;
    *count = 1;
    return PyLong_CheckExact(*value);
}

/* normalize_axis_index: ``*axis`` in [-ndim, ndim), made non-negative: 1, else 0. */
static int normalize_axis(Py_ssize_t *axis, Py_ssize_t ndim)
{
    if (*axis < -ndim || *axis >= ndim)
        return 0;
    if (*axis < 0)
        *axis += ndim;
    return 1;
}

/* normalize_axis_tuple: ``count`` ints, each normalized into ``axes`` and marked in ``chosen``,
   none repeated: 1, else 0. */
static int normalize_axes(PyObject *const *items, Py_ssize_t count, Py_ssize_t ndim, Py_ssize_t *axes, char *chosen)
{
    memset(chosen, 0, MAX_AXES);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!int_value(items[i], &axes[i]) || !normalize_axis(&axes[i], ndim) || chosen[axes[i]])
            return 0;
        chosen[axes[i]] = 1;
    }
    return 1;
}

static PyObject *int_tuple(const Py_ssize_t *values, Py_ssize_t count)
{
    PyObject *tuple = PyTuple_New(count);
    for (Py_ssize_t i = 0; tuple != NULL && i < count; i++) {
        PyObject *value = PyLong_FromSsize_t(values[i]);
        if (value == NULL)
            Py_CLEAR(tuple);
        else
            PyTuple_SET_ITEM(tuple, i, value);
    }
    return tuple;
}

/* (name, value); steals ``value``. */
static PyObject *param(PyObject *name, PyObject *value)
{
    PyObject *pair = value == NULL ? NULL : PyTuple_New(2);
    if (pair == NULL) {
        Py_XDECREF(value);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, Py_NewRef(name));
    PyTuple_SET_ITEM(pair, 1, value);
    return pair;
}

/* ((name, value),), a view's or a cast's params; steals ``value``. */
static PyObject *one_param(PyObject *name, PyObject *value)
{
    PyObject *pair = param(name, value), *params = pair == NULL ? NULL : PyTuple_New(1);
    if (params == NULL) {
        Py_XDECREF(pair);
        return NULL;
    }
    PyTuple_SET_ITEM(params, 0, pair);
    return params;
}

/* (start, step, length), a slice as views.basic_index normalizes it. */
static PyObject *index_triple(Py_ssize_t start, Py_ssize_t step, Py_ssize_t length)
{
    Py_ssize_t values[3] = {start, step, length};
    return int_tuple(values, 3);
}

/* Nodes over one source whose params follow from the source's structure and a few ints (a view's
   index or axes, a reduction's axes, a cast's params): kept by (op, the source's structure id, those
   ints) with their params, shape, dtype and structure id, so that a loop recording the same view
   each turn builds and interns no tuple. A kept id names its structure alone (ids are never reused);
   an address among the ints is that of an object the entry holds (its params). */
enum { NODE_MEMO_SIZE = 512, NODE_MEMO_WORDS = 24 };
typedef struct {
    PyObject *op, *source_key; /* strong, with the rest; NULL in an empty entry */
    Py_ssize_t count, words[NODE_MEMO_WORDS];
    PyObject *params, *shape, *dtype, *key;
} NodeMemo;
static NodeMemo node_memo[NODE_MEMO_SIZE];

/* A node being made through the memo: the ints that say it, then the entry for them and, where it
   held them, new references to its params, shape, dtype and id. */
typedef struct {
    Py_ssize_t count, words[NODE_MEMO_WORDS]; /* count -1: too many to keep */
    NodeMemo *entry;                           /* NULL: not kept (a keyless source, too many ints) */
    PyObject *source_key;                      /* borrowed from the source */
    PyObject *params, *shape, *dtype, *key;    /* found: new references; NULL otherwise */
} MemoLookup;

static inline void memo_start(MemoLookup *lookup)
{
    lookup->count = 0;
    lookup->entry = NULL;
    lookup->params = lookup->shape = lookup->dtype = lookup->key = NULL;
}

static inline void memo_word(MemoLookup *lookup, Py_ssize_t word)
{
    if (lookup->count >= 0 && lookup->count < NODE_MEMO_WORDS)
        lookup->words[lookup->count++] = word;
    else
        lookup->count = -1;
}

/* Whether the memo holds the node of ``op`` over ``source`` for the ints given: 1 with the
   lookup's references taken, else 0 (the entry, where one may keep it, is noted for memo_keep). */
static int memo_find(MemoLookup *lookup, PyObject *op, PyObject *source)
{
    PyObject *key = NODE_SLOT(source, KEY);
    if (lookup->count < 0 || key == NULL || key == Py_None)
        return 0;
    uint64_t hash = ((uint64_t)(uintptr_t)op ^ ((uint64_t)(uintptr_t)key << 17)) * 0x9E3779B97F4A7C15ull;
    for (Py_ssize_t i = 0; i < lookup->count; i++)
        hash = (hash ^ (uint64_t)lookup->words[i]) * 0x9E3779B97F4A7C15ull;
    NodeMemo *entry = &node_memo[(hash >> 40) % NODE_MEMO_SIZE];
    lookup->entry = entry;
    lookup->source_key = key;
    if (entry->op != op || entry->source_key != key || entry->count != lookup->count
        || memcmp(entry->words, lookup->words, (size_t)lookup->count * sizeof(Py_ssize_t)) != 0)
        return 0;
    lookup->params = Py_NewRef(entry->params);
    lookup->shape = Py_NewRef(entry->shape);
    lookup->dtype = Py_NewRef(entry->dtype);
    lookup->key = Py_NewRef(entry->key);
    return 1;
}

/* Keep ``node`` (of ``op``, just made where memo_find found nothing) in the entry noted for it. */
static void memo_keep(MemoLookup *lookup, PyObject *op, PyObject *node)
{
    NodeMemo *entry = lookup->entry;
    PyObject *key = NODE_SLOT(node, KEY);
    if (entry == NULL || key == NULL || key == Py_None)
        return;
    NodeMemo old = *entry; /* released last: a release may run code that reads the memo */
    entry->op = Py_NewRef(op);
    entry->source_key = Py_NewRef(lookup->source_key);
    entry->count = lookup->count;
    memcpy(entry->words, lookup->words, (size_t)lookup->count * sizeof(Py_ssize_t));
    entry->params = Py_NewRef(NODE_SLOT(node, PARAMS));
    entry->shape = Py_NewRef(NODE_SLOT(node, SHAPE));
    entry->dtype = Py_NewRef(NODE_SLOT(node, DTYPE));
    entry->key = Py_NewRef(key);
    PyObject *released[] = {old.op, old.source_key, old.params, old.shape, old.dtype, old.key};
    for (size_t i = 0; i < sizeof released / sizeof *released; i++)
        Py_XDECREF(released[i]);
}

/* Node(op, (source,), params, shape, dtype), with the id ``lookup`` found, or kept in it. */
static PyObject *node_over(PyObject *op, PyObject *source, PyObject *params, PyObject *shape, PyObject *dtype,
                           MemoLookup *lookup)
{
    PyObject *inputs = PyTuple_Pack(1, source);
    PyObject *node = inputs == NULL ? NULL : S.node_type->tp_alloc(S.node_type, 0);
    if (node != NULL && init_node(node, op, inputs, params, shape, dtype, lookup->key) < 0)
        Py_CLEAR(node);
    if (node != NULL && lookup->key == NULL)
        memo_keep(lookup, op, node);
    Py_XDECREF(inputs);
    return node;
}

/* The references a lookup took, dropped. */
static void memo_release(MemoLookup *lookup)
{
    Py_CLEAR(lookup->params);
    Py_CLEAR(lookup->shape);
    Py_CLEAR(lookup->dtype);
    Py_CLEAR(lookup->key);
}

/* record.view: the view's node over ``source`` (the node of ``array``) and its array, registered
   with the base; where NumPy gives a scalar (``is_view`` 0), a copy: the view cast to its dtype.
   Steals ``params`` and ``shape``, or takes them from ``lookup`` where it found them. */
static PyObject *record_view(PyObject *array, PyObject *source, PyObject *op, PyObject *params, PyObject *shape,
                             int is_view, MemoLookup *lookup)
{
    PyObject *result = NULL, *node = NULL, *dtype = NODE_SLOT(source, DTYPE);
    if (lookup->key != NULL) {
        params = Py_NewRef(lookup->params);
        shape = Py_NewRef(lookup->shape);
    }
    if (params == NULL || shape == NULL || (node = node_over(op, source, params, shape, dtype, lookup)) == NULL)
        goto done;
    if (is_view) {
        PyObject *base = ARRAY_SLOT(array, ARRAY_BASE);
        if (base == NULL || base == Py_None) {
            base = array;
        } else if (!PyObject_TypeCheck(base, S.array_type)) {
            PyErr_SetString(PyExc_TypeError, "a view's base is not a LazyArray");
            Py_DECREF(node);
            goto done;
        }
        /* a scalar's 0-d view stays a scalar, but NumPy's s[...] is an array */
        result = new_array(node, base, is_scalar(array) && PyTuple_GET_SIZE(shape) == 0 && op != S.getitem_op);
    } else { /* the cast: its params follow from the view's structure */
        MemoLookup cast_lookup;
        memo_start(&cast_lookup);
        PyObject *cast = NULL, *cast_params = NULL;
        if (memo_find(&cast_lookup, S.astype_op, node))
            cast_params = Py_NewRef(cast_lookup.params);
        else
            cast_params = one_param(S.str_dtype, Py_NewRef(dtype));
        if (cast_params != NULL)
            cast = node_over(S.astype_op, node, cast_params, shape, dtype, &cast_lookup);
        memo_release(&cast_lookup);
        Py_XDECREF(cast_params);
        Py_DECREF(node);
        if (cast != NULL)
            result = new_array(cast, NULL, 1);
    }
done:
    memo_release(lookup);
    Py_XDECREF(params);
    Py_XDECREF(shape);
    return result;
}

/* slice.indices(length) for a slice of None and ints that fit, step not 0: 1, else 0. */
static int slice_indices(PyObject *item, Py_ssize_t length, Py_ssize_t *start, Py_ssize_t *step,
                         Py_ssize_t *count)
{
    PySliceObject *slice = (PySliceObject *)item;
    PyObject *parts[3] = {slice->start, slice->stop, slice->step};
    Py_ssize_t stop;
    for (int i = 0; i < 3; i++)
        if (parts[i] != Py_None && !int_value(parts[i], &stop))
            return 0;
    if (PySlice_Unpack(item, start, &stop, step) < 0) { /* a step of 0 */
        PyErr_Clear();
        return 0;
    }
    if (*step <= -PY_SSIZE_T_MAX) /* clamped by PySlice_Unpack, where slice.indices is exact */
        return 0;
    *count = PySlice_AdjustIndices(length, start, &stop, *step);
    return 1;
}

static int put(PyObject *tuple, Py_ssize_t *position, PyObject *value)
{
    if (value == NULL)
        return -1;
    PyTuple_SET_ITEM(tuple, (*position)++, value);
    return 0;
}

/* record.getitem(array, index): views.basic_index, then record.view */
static PyObject *record_getitem(PyObject *array, PyObject *index)
{
    Py_ssize_t extents[MAX_AXES], ndim;
    PyObject *source = pending_node(array, extents, &ndim);
    if (source == NULL)
        return declined();
    PyObject *const *items = &index;
    Py_ssize_t count = 1, consumed = 0, ellipses = 0, new_axes = 0, slices = 0;
    if (PyTuple_CheckExact(index)) {
        items = ((PyTupleObject *)index)->ob_item;
        count = PyTuple_GET_SIZE(index);
    } else if (PyTuple_Check(index)) {
        return declined();
    }
    if (count > MAX_AXES)
        return declined();
    for (Py_ssize_t i = 0; i < count; i++) {
        if (items[i] == Py_None)
            new_axes++;
        else if (items[i] == Py_Ellipsis)
            ellipses++;
        else if (PySlice_Check(items[i]))
            slices++;
        else if (!PyLong_CheckExact(items[i]))
            return declined();
    }
    consumed = count - new_axes - ellipses;
    Py_ssize_t whole = ndim - consumed; /* axes taken whole, by the Ellipsis or after the last item */
    if (ellipses > 1 || whole < 0 || new_axes + slices + whole > MAX_AXES)
        return declined();
    /* The index as views.basic_index normalizes it, one (start, step, length) per item: a new axis
       with step 0 and length 1, an int with step 0 and length -1, a slice or an axis taken whole
       with its length (an empty one as (0, 1, 0)) */
    enum { NEW_AXIS = 0, INTEGER = -1 };
    Py_ssize_t starts[2 * MAX_AXES], steps[2 * MAX_AXES], lengths[2 * MAX_AXES];
    Py_ssize_t normalized_count = count - ellipses + whole, position = 0, axis = 0;
    for (Py_ssize_t i = 0; i <= count; i++) {
        PyObject *item = i < count ? items[i] : NULL; /* NULL: the axes after the last item */
        if (item == Py_None) {
            starts[position] = 0, steps[position] = 0, lengths[position++] = NEW_AXIS;
        } else if (item == Py_Ellipsis || item == NULL) {
            for (Py_ssize_t end = item == NULL ? ndim : axis + whole; axis < end; axis++)
                starts[position] = 0, steps[position] = 1, lengths[position++] = extents[axis];
        } else if (PyLong_CheckExact(item)) {
            if (!int_value(item, &starts[position]) || !normalize_axis(&starts[position], extents[axis]))
                return declined(); /* out of bounds: NumPy's IndexError */
            steps[position] = 0, lengths[position++] = INTEGER;
            axis++;
        } else {
            if (!slice_indices(item, extents[axis], &starts[position], &steps[position], &lengths[position]))
                return declined();
            if (lengths[position] == 0)
                starts[position] = 0, steps[position] = 1;
            position++, axis++;
        }
    }
    int is_view = new_axes + slices + whole > 0 || ellipses > 0;
    MemoLookup lookup;
    memo_start(&lookup);
    memo_word(&lookup, is_view);
    for (Py_ssize_t i = 0; i < normalized_count; i++) {
        memo_word(&lookup, starts[i]);
        memo_word(&lookup, steps[i]);
        memo_word(&lookup, lengths[i]);
    }
    if (memo_find(&lookup, S.getitem_op, source))
        return record_view(array, source, S.getitem_op, NULL, NULL, is_view, &lookup);
    PyObject *normalized = PyTuple_New(normalized_count), *shape = PyTuple_New(new_axes + slices + whole);
    Py_ssize_t out = 0;
    for (Py_ssize_t i = 0; normalized != NULL && shape != NULL && i < normalized_count; i++) {
        PyObject *item;
        if (lengths[i] == INTEGER)
            item = PyLong_FromSsize_t(starts[i]);
        else if (steps[i] == 0)
            item = Py_NewRef(Py_None);
        else
            item = index_triple(starts[i], steps[i], lengths[i]);
        Py_ssize_t at = i;
        if (put(normalized, &at, item) < 0
            || (lengths[i] != INTEGER && put(shape, &out, PyLong_FromSsize_t(steps[i] == 0 ? 1 : lengths[i])) < 0))
            Py_CLEAR(normalized);
    }
    if (normalized == NULL || shape == NULL) {
        Py_XDECREF(normalized);
        Py_XDECREF(shape);
        return NULL;
    }
    return record_view(array, source, S.getitem_op, one_param(S.str_index, normalized), shape, is_view, &lookup);
}

/* LazyArray.transpose(*axes), record.transpose(array, axes): views.transpose_axes, record.permute */
static PyObject *record_transpose(PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t extents[MAX_AXES], axes[MAX_AXES], ndim;
    char chosen[MAX_AXES];
    PyObject *source = nargs >= 1 ? pending_node(args[0], extents, &ndim) : NULL;
    if (source == NULL)
        return declined();
    if (nargs == 1 || (nargs == 2 && args[1] == Py_None)) {
        for (Py_ssize_t axis = 0; axis < ndim; axis++)
            axes[axis] = ndim - 1 - axis;
    } else {
        PyObject *const *items = args + 1;
        Py_ssize_t count = nargs - 1;
        if (nargs == 2 && PyTuple_CheckExact(args[1])) {
            items = ((PyTupleObject *)args[1])->ob_item;
            count = PyTuple_GET_SIZE(args[1]);
        }
        if (count != ndim || !normalize_axes(items, count, ndim, axes, chosen))
            return declined();
    }
    MemoLookup lookup;
    memo_start(&lookup);
    for (Py_ssize_t axis = 0; axis < ndim; axis++)
        memo_word(&lookup, axes[axis]);
    if (memo_find(&lookup, S.transpose_op, source))
        return record_view(args[0], source, S.transpose_op, NULL, NULL, 1, &lookup);
    PyObject *old_shape = NODE_SLOT(source, SHAPE), *shape = PyTuple_New(ndim);
    for (Py_ssize_t axis = 0; shape != NULL && axis < ndim; axis++)
        PyTuple_SET_ITEM(shape, axis, Py_NewRef(PyTuple_GET_ITEM(old_shape, axes[axis])));
    return record_view(args[0], source, S.transpose_op, one_param(S.str_axes, int_tuple(axes, ndim)), shape, 1,
                       &lookup);
}

/* A reshape of ``array`` into ``count`` extents (views.reshape_shape has checked them). */
static PyObject *reshape_into(PyObject *array, PyObject *source, const Py_ssize_t *sizes, Py_ssize_t count)
{
    MemoLookup lookup;
    memo_start(&lookup);
    for (Py_ssize_t axis = 0; axis < count; axis++)
        memo_word(&lookup, sizes[axis]);
    if (memo_find(&lookup, S.reshape_op, source))
        return record_view(array, source, S.reshape_op, NULL, NULL, 1, &lookup);
    PyObject *shape = int_tuple(sizes, count);
    return record_view(array, source, S.reshape_op, one_param(S.str_shape, Py_XNewRef(shape)), shape, 1, &lookup);
}

/* LazyArray.reshape(*shape), record.reshape(array, shape): views.reshape_shape, a reshape view */
static PyObject *record_reshape(PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t extents[MAX_AXES], sizes[MAX_AXES], ndim, count = nargs - 1;
    PyObject *source = nargs >= 2 ? pending_node(args[0], extents, &ndim) : NULL;
    PyObject *const *items = args + 1;
    if (source == NULL || (nargs == 2 && !int_items(args + 1, &items, &count)) || count > MAX_AXES)
        return declined();
    Py_ssize_t size = 1, known = 1, unknown = -1;
    for (Py_ssize_t axis = 0; axis < ndim; axis++)
        if (__builtin_mul_overflow(size, extents[axis], &size))
            return declined();
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!int_value(items[i], &sizes[i]) || sizes[i] < -1 || (sizes[i] == -1 && unknown >= 0))
            return declined();
        if (sizes[i] == -1)
            unknown = i;
        else if (__builtin_mul_overflow(known, sizes[i], &known))
            return declined();
    }
    if (unknown >= 0) {
        if (known == 0 || size % known != 0)
            return declined();
        sizes[unknown] = size / known;
    } else if (known != size) {
        return declined();
    }
    return reshape_into(args[0], source, sizes, count);
}

/* Arguments after the first by name (``names``, the first ``positional`` of them also by
   position), into ``values`` (left NULL where not given): 1, else 0 (one it does not know). */
static int arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names,
                     Py_ssize_t count, Py_ssize_t positional, PyObject **values)
{
    if (nargs < 1 || nargs - 1 > positional)
        return 0;
    for (Py_ssize_t i = 1; i < nargs; i++)
        values[i - 1] = args[i];
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < keywords; k++) {
        Py_ssize_t i = 0;
        while (i < count && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), names[i]) != 0)
            i++;
        if (i == count || values[i] != NULL)
            return 0;
        values[i] = args[nargs + k];
    }
    return 1;
}

/* LazyArray.squeeze(axis=None): NumPy's squeeze of the shape, a reshape view */
static PyObject *record_squeeze(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"axis"};
    Py_ssize_t extents[MAX_AXES], axes[MAX_AXES], sizes[MAX_AXES], ndim, count, kept = 0;
    char chosen[MAX_AXES];
    PyObject *axis = NULL, *const *items;
    PyObject *source = arguments(args, nargs, kwnames, names, 1, 1, &axis) ? pending_node(args[0], extents, &ndim) : NULL;
    if (source == NULL)
        return declined();
    if (axis == NULL || axis == Py_None) {
        for (Py_ssize_t i = 0; i < ndim; i++)
            chosen[i] = extents[i] == 1;
    } else if (!int_items(&axis, &items, &count) || !normalize_axes(items, count, ndim, axes, chosen)) {
        return declined();
    }
    for (Py_ssize_t i = 0; i < ndim; i++) {
        if (!chosen[i])
            sizes[kept++] = extents[i];
        else if (extents[i] != 1) /* NumPy's ValueError */
            return declined();
    }
    return reshape_into(args[0], source, sizes, kept);
}

/* record.expand_dims(array, axis): NumPy's expand_dims of the shape, a reshape view */
static PyObject *record_expand_dims(PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t extents[MAX_AXES], axes[MAX_AXES], sizes[MAX_AXES], ndim, count;
    char chosen[MAX_AXES];
    PyObject *const *items;
    PyObject *source = nargs == 2 ? pending_node(args[0], extents, &ndim) : NULL;
    if (source == NULL || !int_items(args + 1, &items, &count) || ndim + count > MAX_AXES
        || !normalize_axes(items, count, ndim + count, axes, chosen))
        return declined();
    for (Py_ssize_t axis = 0, kept = 0; axis < ndim + count; axis++)
        sizes[axis] = chosen[axis] ? 1 : extents[kept++];
    return reshape_into(args[0], source, sizes, ndim + count);
}

/* record.reduction(name, array, axis=..., keepdims=...) for a primitive reduction (the op) of a
   non-empty array; ``one_axis`` for argmax and argmin, whose axis is one int or None. */
/* Whether a pending node reads through a boolean mask (record._masked_select), so that its reduction
   is the Python method's (record._masked_reduction, on whole arrays) */
static int reads_through_a_mask(PyObject *node)
{
    if (NODE_SLOT(node, OP) == S.masked_select_op)
        return 1;
    PyObject *ancestors = NODE_SLOT(node, ANCESTORS);
    if (ancestors == NULL || !PyTuple_CheckExact(ancestors))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ancestors); i++)
        if (NODE_SLOT(PyTuple_GET_ITEM(ancestors, i), OP) == S.masked_select_op)
            return 1;
    return 0;
}

static PyObject *record_reduction(PyObject *op, int one_axis, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    static const char *const names[] = {"axis", "keepdims"};
    Py_ssize_t extents[MAX_AXES], axes[MAX_AXES], ndim, count;
    char chosen[MAX_AXES];
    PyObject *values[2] = {NULL, NULL}, *const *items, *result = NULL;
    PyObject *source = arguments(args, nargs, kwnames, names, 2, 1, values) ? pending_node(args[0], extents, &ndim) : NULL;
    if (source == NULL || reads_through_a_mask(source))
        return declined();
    PyObject *axis = values[0], *keepdims = values[1] == NULL ? Py_False : values[1];
    for (Py_ssize_t i = 0; i < ndim; i++)
        if (extents[i] == 0) /* which reductions of an empty array raise depends on its shape */
            return declined();
    if (keepdims != Py_True && keepdims != Py_False)
        return declined();
    int every_axis = axis == NULL || axis == Py_None;
    if (every_axis) {
        for (Py_ssize_t i = 0; i < ndim; i++) {
            axes[i] = i;
            chosen[i] = 1;
        }
        count = ndim;
    } else if ((one_axis && !PyLong_CheckExact(axis)) || !int_items(&axis, &items, &count)
               || !normalize_axes(items, count, ndim, axes, chosen)) {
        return declined();
    } else { /* in order, as views.reduction_axes gives them */
        for (Py_ssize_t i = 0, position = 0; i < ndim; i++)
            if (chosen[i])
                axes[position++] = i;
    }
    MemoLookup lookup;
    memo_start(&lookup);
    memo_word(&lookup, every_axis);
    memo_word(&lookup, keepdims == Py_True);
    for (Py_ssize_t i = 0; i < count; i++)
        memo_word(&lookup, axes[i]);
    if (memo_find(&lookup, op, source)) {
        PyObject *node = node_over(op, source, lookup.params, lookup.shape, lookup.dtype, &lookup);
        if (node != NULL)
            result = new_array(node, NULL, PyTuple_GET_SIZE(lookup.shape) == 0);
        memo_release(&lookup);
        return result;
    }
    PyObject *axis_param = !one_axis ? int_tuple(axes, count) : every_axis ? Py_NewRef(Py_None) : PyLong_FromSsize_t(axes[0]);
    PyObject *axis_pair = param(S.str_axis, axis_param), *keepdims_pair = param(S.str_keepdims, Py_NewRef(keepdims));
    PyObject *params = axis_pair != NULL && keepdims_pair != NULL ? PyTuple_New(2) : NULL;
    if (params == NULL) {
        Py_XDECREF(axis_pair);
        Py_XDECREF(keepdims_pair);
        return NULL;
    }
    PyTuple_SET_ITEM(params, 0, axis_pair);
    PyTuple_SET_ITEM(params, 1, keepdims_pair);
    PyObject *shape = NULL, *key = NULL, *dtype = NULL, *old_shape = NODE_SLOT(source, SHAPE);
    PyObject *rank = PyLong_FromSsize_t(ndim);
    if (rank == NULL || (key = PyTuple_Pack(4, op, NODE_SLOT(source, DTYPE), rank, params)) == NULL)
        goto done;
    dtype = Py_XNewRef(PyDict_GetItemWithError(S.common_reductions, key));
    if (dtype == NULL) {
        if (PyErr_Occurred())
            goto done;
        dtype = PyObject_CallFunctionObjArgs(S.common_reduction, op, NODE_SLOT(source, DTYPE), old_shape, params,
                                             NULL);
        if (dtype == NULL || PyDict_SetItem(S.common_reductions, key, dtype) < 0)
            goto done;
    }
    if (dtype == Py_False) {
        result = declined();
        goto done;
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < ndim; i++)
        kept += !chosen[i] || keepdims == Py_True;
    if ((shape = PyTuple_New(kept)) == NULL)
        goto done;
    for (Py_ssize_t i = 0, position = 0; i < ndim; i++) {
        if (!chosen[i])
            PyTuple_SET_ITEM(shape, position++, Py_NewRef(PyTuple_GET_ITEM(old_shape, i)));
        else if (keepdims == Py_True && put(shape, &position, PyLong_FromLong(1)) < 0)
            goto done;
    }
    PyObject *node = node_over(op, source, params, shape, dtype, &lookup);
    if (node != NULL)
        result = new_array(node, NULL, PyTuple_GET_SIZE(shape) == 0);
done:
    Py_XDECREF(params);
    Py_XDECREF(rank);
    Py_XDECREF(key);
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    return result;
}

enum { CAST_MEMO_SIZE = 64 };
static IdentityEntry cast_memo[CAST_MEMO_SIZE]; /* record._common_casts by the dtypes' identities */

/* record.astype(array, dtype) with the default casting and copy: its params from
   record._common_casts, keyed by the array's dtype and the dtype as given. */
static PyObject *record_astype(PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t extents[MAX_AXES], ndim;
    PyObject *source = nargs == 2 ? pending_node(args[0], extents, &ndim) : NULL;
    if (source == NULL)
        return declined();
    /* by identity first: hashing a dtype costs NumPy a walk of its fields */
    PyObject *parts[IDENTITY_PARTS] = {NODE_SLOT(source, DTYPE), args[1], NULL, NULL};
    IdentityEntry *entry = identity_entry(cast_memo, CAST_MEMO_SIZE, parts);
    PyObject *key = NULL, *result = NULL, *params = Py_XNewRef(identity_get(entry, parts));
    if (params == NULL && (key = PyTuple_Pack(2, NODE_SLOT(source, DTYPE), args[1])) == NULL)
        return NULL;
    if (params == NULL && (params = Py_XNewRef(PyDict_GetItemWithError(S.common_casts, key))) != NULL)
        identity_put(entry, parts, params);
    if (params == NULL) {
        if (PyErr_Occurred()) { /* an unhashable dtype: Python says what NumPy makes of it */
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                result = declined();
            }
            goto done;
        }
        params = PyObject_CallFunctionObjArgs(S.common_cast, NODE_SLOT(source, DTYPE), args[1], NULL);
        if (params == NULL || PyDict_SetItem(S.common_casts, key, params) < 0)
            goto done;
        identity_put(entry, parts, params);
    }
    if (params == Py_False) {
        result = declined();
        goto done;
    }
    if (!PyTuple_CheckExact(params) || PyTuple_GET_SIZE(params) != 1 || !PyTuple_CheckExact(PyTuple_GET_ITEM(params, 0))
        || PyTuple_GET_SIZE(PyTuple_GET_ITEM(params, 0)) != 2) {
        PyErr_SetString(PyExc_TypeError, "record._common_casts holds malformed params");
        goto done;
    }
    PyObject *dtype = PyTuple_GET_ITEM(PyTuple_GET_ITEM(params, 0), 1);
    MemoLookup lookup; /* the params are record._common_casts' own, which the memo's entry holds */
    memo_start(&lookup);
    memo_word(&lookup, (Py_ssize_t)(uintptr_t)params);
    memo_find(&lookup, S.astype_op, source);
    PyObject *node = node_over(S.astype_op, source, params, NODE_SLOT(source, SHAPE), dtype, &lookup);
    memo_release(&lookup);
    if (node != NULL)
        result = new_array(node, NULL, is_scalar(args[0]));
done:
    Py_XDECREF(key);
    Py_XDECREF(params);
    return result;
}

/* LazyArray methods and record functions whose common case is recorded here: an operator (its
   operand order: one operand, forward or reflected) or __array_ufunc__ (the op looked up by ufunc)
   by record_common, or a view, reduction or cast (its kind) by the functions above. When they
   decline, the Python function runs: it is the general path. */
enum {
    ORDER_UNARY, ORDER_FORWARD, ORDER_REFLECTED, ORDER_UFUNC,
    ORDER_GETITEM, ORDER_TRANSPOSE, ORDER_RESHAPE, ORDER_SQUEEZE, ORDER_EXPAND_DIMS, ORDER_REDUCE, ORDER_ONE_AXIS,
    ORDER_ASTYPE, ORDER_SETITEM, ORDER_IN_PLACE, ORDER_ARRAY, ORDER_NUMPY, ORDER_POWER, ORDER_COPY, ORDER_VALUE,
};
static const char *const order_names[] = {
    "unary", "forward", "reflected", "ufunc",
    "getitem", "transpose", "reshape", "squeeze", "expand_dims", "reduce", "one_axis", "astype", "setitem", "in place", "array", "numpy", "power", "copy",
    "value", NULL,
};

/* A transpose, reshape, squeeze, cast or copy of a small computed host array, by the ndarray's
   method of that name with the same arguments (direct.view_op): a view of the buffer registered with the
   array's base, or a fresh array. NULL where it does not apply, or with NumPy's error set. */
static PyObject *view_now(long order, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const names[] = {
        [ORDER_TRANSPOSE] = "transpose", [ORDER_RESHAPE] = "reshape", [ORDER_SQUEEZE] = "squeeze", [ORDER_ASTYPE] = "astype",
        [ORDER_COPY] = "copy",
    };
    static PyObject *interned[ORDER_COPY + 1];
    PyObject *node = nargs < 1 ? NULL : small_host_node(args[0]);
    if (node == NULL)
        return NULL;
    if (interned[order] == NULL && (interned[order] = PyUnicode_InternFromString(names[order])) == NULL)
        return NULL;
    PyObject *buffer = NODE_SLOT(node, BUFFER), *call[MAX_AXES + 1] = {buffer};
    if (nargs > MAX_AXES + 1)
        return NULL;
    for (Py_ssize_t i = 1; i < nargs; i++)
        call[i] = args[i];
    PyObject *made = PyObject_VectorcallMethod(interned[order], call, nargs, NULL);
    if (made == NULL || !PyArray_Check(made))
        return made;
    PyObject *base = PyArray_BASE((PyArrayObject *)made), *buffer_base = PyArray_BASE((PyArrayObject *)buffer);
    if (base != NULL && (base == buffer || base == buffer_base)) { /* NumPy's view of it */
        PyObject *view = direct_view(args[0], made, 1);
        Py_DECREF(made);
        return view;
    }
    return direct_result(made);
}

/* direct.numpy_call: NumPy's function called now on the buffers of the small computed lazy arrays
   among its arguments (in lists and tuples too), its array results wrapped as direct.numpy_call
   wraps them. What it may not take (a pending or large array, another library's array, a dict, a
   call with device= or like=, or with out= while a node is pending, a writing function, a large
   result) it declines: NULL without an error; NumPy's function has no effect besides its result
   and what it writes into out=, which no pending node can read. */
enum { MAX_HANDED = 32 };
typedef struct {
    PyObject *arrays[MAX_HANDED], *lazies[MAX_HANDED]; /* borrowed: the arrays NumPy gets, their lazy arrays or NULL */
    int count;
    Py_ssize_t limit;
} Handed;

static int plain_argument(PyObject *value)
{
    return value == Py_None || value == Py_Ellipsis || PyUnicode_CheckExact(value) || PyType_Check(value)
           || PySlice_Check(value) || PyArray_DescrCheck(value)
           || PySet_Contains(S.scalars, (PyObject *)Py_TYPE(value)) == 1;
}

/* A new tuple or list, as ``sequence`` is, of ``map(item, handed, depth + 1)`` for each of its
   items: what numpy_call does to the arguments it hands NumPy, and to NumPy's results. NULL where
   ``map`` gives NULL for one. */
static PyObject *mapped_items(PyObject *sequence, PyObject *(*map)(PyObject *, Handed *, int), Handed *handed,
                              int depth)
{
    int tuple = PyTuple_CheckExact(sequence);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    PyObject *mapped = tuple ? PyTuple_New(count) : PyList_New(count);
    for (Py_ssize_t i = 0; mapped != NULL && i < count; i++) {
        PyObject *item = map(PySequence_Fast_GET_ITEM(sequence, i), handed, depth + 1);
        if (item == NULL)
            Py_CLEAR(mapped);
        else if (tuple)
            PyTuple_SET_ITEM(mapped, i, item);
        else
            PyList_SET_ITEM(mapped, i, item);
    }
    return mapped;
}

/* ``value`` with each lazy array replaced by its buffer (a new reference), tuples and lists to a
   depth of 4; NULL where declined. */
static PyObject *substituted(PyObject *value, Handed *handed, int depth)
{
    if (Py_IS_TYPE(value, S.array_type)) {
        PyObject *node = small_host_node(value);
        if (node == NULL || handed->count == MAX_HANDED)
            return NULL; /* an error reading a shape is cleared by numpy_now: declined */
        PyObject *buffer = NODE_SLOT(node, BUFFER);
        handed->arrays[handed->count] = buffer;
        handed->lazies[handed->count++] = value;
        return Py_NewRef(buffer);
    }
    if (PyArray_CheckExact(value)) {
        if (handed->count == MAX_HANDED)
            return NULL;
        handed->arrays[handed->count] = value;
        handed->lazies[handed->count++] = NULL;
        return Py_NewRef(value);
    }
    if ((PyTuple_CheckExact(value) || PyList_CheckExact(value)) && depth < 4)
        return mapped_items(value, substituted, handed, depth);
    return plain_argument(value) ? Py_NewRef(value) : NULL;
}

/* Whether a result holds an array of ``limit`` elements or more. */
static int large_result(PyObject *made, Py_ssize_t limit)
{
    if (PyArray_Check(made))
        return PyArray_SIZE((PyArrayObject *)made) >= limit;
    if (PyTuple_CheckExact(made) || PyList_CheckExact(made)) {
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(made); i++)
            if (large_result(PySequence_Fast_GET_ITEM(made, i), limit))
                return 1;
    }
    return 0;
}

/* NumPy's result as direct.numpy_call gives it (``made`` borrowed), tuples and lists at any
   ``depth`` (which only mapped_items counts). */
static PyObject *as_lazy(PyObject *made, Handed *handed, int depth)
{
    if (PyTuple_CheckExact(made) || PyList_CheckExact(made))
        return mapped_items(made, as_lazy, handed, depth);
    if (!PyArray_Check(made))
        return Py_NewRef(made);
    PyObject *owner = PyArray_BASE((PyArrayObject *)made);
    for (int i = 0; i < handed->count; i++) {
        PyObject *array = handed->arrays[i], *lazy = handed->lazies[i];
        PyObject *array_base = PyArray_BASE((PyArrayObject *)array);
        if (made == array)
            return lazy != NULL ? Py_NewRef(lazy) : leaf_array(made, 1);
        if (owner != NULL && (owner == array || (array_base != NULL && owner == array_base)))
            return lazy != NULL ? direct_view(lazy, made, 1) : leaf_array(made, 1);
    }
    /* memory of another array's: whoever holds that sees writes to it; else NumPy's new memory */
    return leaf_array(made, owner != NULL);
}

static PyObject *numpy_now(PyObject *function, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < keywords; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if ((PyUnicode_CompareWithASCIIString(name, "out") == 0 && !nothing_pending())
            || PyUnicode_CompareWithASCIIString(name, "device") == 0 || PyUnicode_CompareWithASCIIString(name, "like") == 0)
            return NULL;
    }
    int writes = PySet_Contains(S.writers, function);
    if (writes != 0) { /* a writer, or an unhashable callable: the general path */
        PyErr_Clear();
        return NULL;
    }
    Handed handed = {.count = 0, .limit = direct_limit()};
    if (handed.limit <= 0 || nargs + keywords > 16)
        return NULL;
    PyObject *call[16];
    Py_ssize_t made_count = 0;
    PyObject *made = NULL;
    for (; made_count < nargs + keywords; made_count++)
        if ((call[made_count] = substituted(args[made_count], &handed, 0)) == NULL)
            break;
    if (made_count == nargs + keywords)
        made = PyObject_Vectorcall(function, call, nargs, kwnames);
    for (Py_ssize_t i = 0; i < made_count; i++)
        Py_DECREF(call[i]);
    if (PyErr_Occurred() && made == NULL && made_count < nargs + keywords)
        PyErr_Clear(); /* a declined argument (an error reading its shape): the general path */
    if (made == NULL)
        return NULL; /* declined, or NumPy's error */
    int large = large_result(made, handed.limit);
    for (int i = 0; large && i < handed.count; i++) {
        if (handed.lazies[i] != NULL) { /* a lazy array's broadcast view or tiling: recorded, so what reads it fuses */
            Py_DECREF(made);
            return NULL;
        }
    }
    ran_at_once();
    PyObject *wrapped = as_lazy(made, &handed, 0);
    if (wrapped != NULL && large) { /* of NumPy's arrays and numbers alone: final, its memory counted */
        PyObject *noted = PyObject_CallOneArg(S.large_made, made);
        if (noted == NULL)
            Py_CLEAR(wrapped);
        Py_XDECREF(noted);
    }
    Py_DECREF(made);
    return wrapped;
}

/* direct.numpy_call(function, args, kwargs) */
static PyObject *numpy_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || !PyDict_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "numpy_call takes a function, a tuple and a dict");
        return NULL;
    }
    Py_ssize_t positional = PyTuple_GET_SIZE(args[1]), keywords = PyDict_GET_SIZE(args[2]);
    if (positional + keywords > 16)
        return Py_NewRef(S.declined);
    PyObject *call[16], *names = PyTuple_New(keywords), *key, *value;
    if (names == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < positional; i++)
        call[i] = PyTuple_GET_ITEM(args[1], i);
    Py_ssize_t position = 0, i = 0;
    while (PyDict_Next(args[2], &position, &key, &value)) {
        PyTuple_SET_ITEM(names, i, Py_NewRef(key));
        call[positional + i++] = value;
    }
    PyObject *made = numpy_now(args[0], call, positional, keywords ? names : NULL);
    Py_DECREF(names);
    return made != NULL || PyErr_Occurred() ? made : Py_NewRef(S.declined);
}

/* A view, reduction or cast of its kind (``order``): the new array, None (declined), or NULL. */
static PyObject *record_kind(long order, PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int keywords = kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0;
    switch (order) {
    case ORDER_GETITEM:
        return nargs == 2 && !keywords ? record_getitem(args[0], args[1]) : declined();
    case ORDER_TRANSPOSE:
        return keywords ? declined() : record_transpose(args, nargs);
    case ORDER_RESHAPE:
        return keywords ? declined() : record_reshape(args, nargs);
    case ORDER_SQUEEZE:
        return record_squeeze(args, nargs, kwnames);
    case ORDER_EXPAND_DIMS:
        return keywords ? declined() : record_expand_dims(args, nargs);
    case ORDER_REDUCE:
    case ORDER_ONE_AXIS:
        return record_reduction(op, order == ORDER_ONE_AXIS, args, nargs, kwnames);
    case ORDER_ASTYPE:
        return keywords ? declined() : record_astype(args, nargs);
    default:
        return declined();
    }
}

/* LazyArray.__array__() (or with dtype=None, copy=None) of a computed host array: its buffer, marked
   exposed, as the Python method gives it. NULL without an error where it does not apply. */
static PyObject *host_buffer(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 1; i < nargs + keywords; i++)
        if (args[i] != Py_None)
            return NULL;
    for (Py_ssize_t i = 0; i < keywords; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_CompareWithASCIIString(name, "dtype") != 0 && PyUnicode_CompareWithASCIIString(name, "copy") != 0)
            return NULL;
    }
    PyObject *node = nargs < 1 ? NULL : host_node(args[0]);
    if (node == NULL)
        return NULL;
    set_slot(node, S.node_offsets[EXPOSED], Py_NewRef(Py_True));
    return Py_NewRef(NODE_SLOT(node, BUFFER));
}

/* The ufunc NumPy's ``array ** exponent`` computes instead of ``power`` (its ``fast_scalar_power``):
   a square for the int 2, a reciprocal for -1, a square root for the float 0.5, of a float or
   complex array; NULL (borrowed, no error) where it calls ``power``. */
static PyObject *power_substitute(PyArrayObject *array, PyObject *exponent)
{
    static const char *const names[] = {"square", "reciprocal", "sqrt"};
    static PyObject *ufuncs[3];
    int which = -1;
    if (PyLong_CheckExact(exponent)) {
        int overflow;
        long value = PyLong_AsLongAndOverflow(exponent, &overflow);
        which = overflow || (value == -1 && PyErr_Occurred()) ? -1 : value == 2 ? 0 : value == -1 ? 1 : -1;
        PyErr_Clear();
    } else if (PyFloat_CheckExact(exponent) && PyFloat_AS_DOUBLE(exponent) == 0.5) {
        which = 2;
    }
    if (which < 0 || !(PyArray_ISFLOAT(array) || PyArray_ISCOMPLEX(array)))
        return NULL;
    return numpy_attribute(&ufuncs[which], names[which]);
}

/* x ** y of a small computed host array by a scalar or a small computed array: NumPy's operator on
   the buffers, its substitute's loop called directly where it has one (power_substitute). NULL
   without an error where it does not apply; with ``*records`` set where the program's site
   records it. */
static PyObject *power_now(PyObject *self, PyObject *exponent, int *records)
{
    PyObject *node = host_node(self), *value = exponent, *other_shape = NULL;
    if (node == NULL || is_scalar(self)) /* a scalar's power: the ufunc, which Python records */
        return NULL;
    if (Py_IS_TYPE(exponent, S.array_type)) {
        PyObject *other = host_node(exponent);
        if (other == NULL)
            return NULL;
        value = NODE_SLOT(other, BUFFER);
        other_shape = NODE_SLOT(other, SHAPE);
    } else {
        int scalar = PySet_Contains(S.scalars, (PyObject *)Py_TYPE(exponent));
        if (scalar != 1)
            return NULL;
    }
    PyObject *shapes[2] = {NODE_SLOT(node, SHAPE), other_shape};
    Py_ssize_t size = broadcast_size(shapes, other_shape == NULL ? 1 : 2);
    Py_ssize_t limit = size < 0 ? -1 : direct_limit();
    if (limit < 0 || size >= limit || (*records = site_records()))
        return NULL;
    PyObject *buffer = NODE_SLOT(node, BUFFER);
    PyObject *substitute = other_shape == NULL ? power_substitute((PyArrayObject *)buffer, exponent) : NULL;
    PyObject *made = substitute == NULL ? NULL : loop_now(substitute, &buffer, 1, NULL); /* its loop, directly */
    if (made == NULL && !PyErr_Occurred())
        made = PyNumber_Power(buffer, value, Py_None);
    return made == NULL ? NULL : direct_result(made);
}

/* x ** y, by power_now, or else by ``general`` (the operator's Python method, which picks NumPy's
   substitute), all at the place the program calls it: one site, whichever path records it. */
static PyObject *power_call(PyObject *general, PyObject *const *args)
{
    Place outer = op_place;
    int was_placed = op_placed, records = 0;
    if (!was_placed)
        op_placed = calling_place(&op_place);
    PyObject *made = recent_count > 0 && end_carried() < 0 ? NULL : power_now(args[0], args[1], &records);
    if (made == NULL && !PyErr_Occurred()) {
        Site *recording = recording_for;
        if (records) /* by the general path, for the site noted */
            recording_for = noted_site;
        made = PyObject_Vectorcall(general, args, 2, NULL);
        recording_for = recording;
    }
    op_place = outer;
    op_placed = was_placed;
    return made;
}

/* A function or method whose common case runs in C (fast_function): ``op`` and ``order`` say which
   case, ``general`` is the Python function that runs otherwise. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *op, *general, *dict;
    long order;
} MethodObject;

static PyObject *fast_method_call(MethodObject *method, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    /* op: the op, the ufunc -> op table, or None */
    PyObject *op = method->op, *general = method->general;
    long order = method->order;
    Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (order == ORDER_POWER && nargs == 2 && keywords == 0) /* x ** y: NumPy's operator, its substitutes too */
        return power_call(general, args);
    if (order == ORDER_NUMPY) { /* NumPy's function (op) on small computed arrays, at once */
        PyObject *made = numpy_now(op, args, nargs, kwnames);
        return made != NULL || PyErr_Occurred() ? made : PyObject_Vectorcall(general, args, nargs, kwnames);
    }
    if (order == ORDER_VALUE) { /* x.item(i), x.tolist(): the buffer's method (op, its name), copies */
        PyObject *node = nargs >= 1 && nargs + keywords <= MAX_AXES + 1 ? host_node(args[0]) : NULL;
        if (node == NULL)
            return PyObject_Vectorcall(general, args, nargs, kwnames);
        PyObject *call[MAX_AXES + 1] = {NODE_SLOT(node, BUFFER)};
        for (Py_ssize_t i = 1; i < nargs + keywords; i++)
            call[i] = args[i];
        return PyObject_VectorcallMethod(op, call, nargs, kwnames);
    }
    if (order == ORDER_ARRAY) { /* numpy.asarray(x): a computed host array's buffer, exposed */
        PyObject *buffer = host_buffer(args, nargs, kwnames);
        /* a pending one whose statement replays (execute.materialize's first way) is computed here */
        int replayed = buffer == NULL && !PyErr_Occurred() && nargs >= 1 ? replayed_pending(args[0]) : 0;
        if (replayed > 0)
            buffer = host_buffer(args, nargs, kwnames);
        if (buffer != NULL || PyErr_Occurred())
            return buffer;
        return PyObject_Vectorcall(general, args, nargs, kwnames);
    }
    /* Computed arrays first: what direct runs at once (an element, a small view or reduction) */
    PyObject *now = NULL;
    if (order == ORDER_GETITEM && nargs == 2 && keywords == 0)
        now = read_elements(args[0], args[1]);
    else if ((order == ORDER_REDUCE || order == ORDER_ONE_AXIS) && keywords <= 4)
        now = reduce_now(op, args[0], args, nargs, kwnames);
    if (now != NULL || PyErr_Occurred())
        return now;
    if ((order == ORDER_TRANSPOSE || order == ORDER_RESHAPE || order == ORDER_SQUEEZE || order == ORDER_ASTYPE
         || (order == ORDER_COPY && nargs == 1))
        && keywords == 0) {
        now = view_now(order, args, nargs);
        if (now != NULL || PyErr_Occurred())
            return now;
    }
    if (order >= ORDER_GETITEM && order <= ORDER_ASTYPE) {
        PyObject *recorded = record_kind(order, op, args, nargs, kwnames);
        if (recorded != Py_None)
            return recorded; /* the new array, or NULL with the error set */
        Py_DECREF(recorded);
        return PyObject_Vectorcall(general, args, nargs, kwnames);
    }
    PyObject *operands[4] = {op, NULL, NULL, NULL};
    Py_ssize_t count = 0;
    if (keywords == 0) {
        if (order == ORDER_UNARY && nargs == 1) {
            operands[1] = args[0];
            count = 2;
        } else if (order == ORDER_FORWARD && (nargs == 2 || nargs == 3)) { /* ``np.where``: three */
            for (Py_ssize_t i = 0; i < nargs; i++)
                operands[1 + i] = args[i];
            count = 1 + nargs;
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
        } else if (order == ORDER_IN_PLACE && nargs == 2) {
            /* through a view (``ey[1:, :] -= value``): a whole array's operator may rebind it to
               its pending value instead (record.can_rebind), which fuses with what follows */
            PyObject *updated = update_in_place(op, args[0], args[1], 0);
            PyObject *base = Py_IS_TYPE(args[0], S.array_type) ? ARRAY_SLOT(args[0], ARRAY_BASE) : NULL;
            int through_view = base != NULL && base != Py_None;
            int replayed = updated == NULL && !PyErr_Occurred() && through_view ? small_write_of_pending(args[0], args[1]) : 0;
            if (replayed > 0 && (replayed = replayed_pending(args[1])) > 0)
                updated = update_in_place(op, args[0], args[1], 0);
            else if (replayed == 0 && updated == NULL && !PyErr_Occurred() && through_view)
                updated = update_view_in_place(op, args[0], args[1]);
            else if (updated == NULL && !PyErr_Occurred() && !through_view)
                updated = rebound_in_place(op, args[0], args[1]);
            if (updated != NULL || PyErr_Occurred())
                return updated;
        } else if (order == ORDER_SETITEM && nargs == 3) {
            /* a pending value (a statement recorded in a loop) is computed first, by its replay */
            int written = write_elements(args[0], args[1], args[2]);
            if (written == 0 && !PyErr_Occurred() && (written = small_write_of_pending(args[0], args[2])) > 0)
                written = replayed_pending(args[2]) > 0 ? write_elements(args[0], args[1], args[2]) : 0;
            if (PyErr_Occurred())
                return NULL;
            if (written != 0)
                return written < 0 ? NULL : Py_NewRef(Py_None);
        }
    }
    if (count == 3 && (op == S.matmul || op == S.dot)) { /* a library call: at once, any size, on computed operands */
        PyObject *made = library_now(op, operands + 1);
        if (made != NULL || PyErr_Occurred())
            return made;
        count = 0;
    }
    if (count > 0 && count <= 3 && order != ORDER_UFUNC) { /* scalars alone: NumPy's scalar math, as NumPy runs it */
        int scalars = 1;
        for (Py_ssize_t i = 1; i < count && scalars == 1; i++)
            scalars = PySet_Contains(S.scalars, (PyObject *)Py_TYPE(operands[i]));
        if (scalars < 0)
            return NULL;
        if (scalars) {
            PyObject *reference = op_reference(op);
            PyObject *made = reference == NULL ? NULL : PyObject_Vectorcall(reference, operands + 1, count - 1, NULL);
            Py_XDECREF(reference);
            return made;
        }
    }
    if (count > 0) {
        PyObject *recorded = record_common_placed(operands, count, NULL);
        if (recorded != Py_None)
            return recorded;  /* the new array, or NULL with the error set */
        Py_DECREF(recorded);
    }
    return PyObject_Vectorcall(general, args, nargs, kwnames);
}


/* The C function standing for a Python function (``general``): it binds as that function does, and
   with Py_TPFLAGS_METHOD_DESCRIPTOR, Python calls it with the instance as the first argument
   (``x[i]``, ``x + y``, ``x.sum()``) without making a bound method first. Its name and docstring are
   the Python function's; its ``__dict__`` takes other attributes (a ufunc's). */
static PyObject *method_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return fast_method_call((MethodObject *)self, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static PyObject *method_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    if (instance == NULL || instance == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, instance);
}

static int method_traverse(PyObject *self, visitproc visit, void *arg)
{
    MethodObject *method = (MethodObject *)self;
    Py_VISIT(method->op);
    Py_VISIT(method->general);
    Py_VISIT(method->dict);
    return 0;
}

static int method_clear(PyObject *self)
{
    MethodObject *method = (MethodObject *)self;
    Py_CLEAR(method->op);
    Py_CLEAR(method->general);
    Py_CLEAR(method->dict);
    return 0;
}

static void method_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    method_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *method_attribute(PyObject *self, void *name)
{
    PyObject *general = ((MethodObject *)self)->general;
    if (general == NULL) {
        PyErr_SetString(PyExc_AttributeError, "cleared");
        return NULL;
    }
    return name == NULL ? Py_NewRef(general) : PyObject_GetAttrString(general, (const char *)name);
}

static PyGetSetDef method_getset[] = {
    {"__name__", method_attribute, NULL, NULL, "__name__"},
    {"__qualname__", method_attribute, NULL, NULL, "__qualname__"},
    {"__module__", method_attribute, NULL, NULL, "__module__"},
    {"__doc__", method_attribute, NULL, NULL, "__doc__"},
    {"__wrapped__", method_attribute, NULL, NULL, NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyObject *method_repr(PyObject *self)
{
    return PyObject_Repr(((MethodObject *)self)->general);
}

static PyTypeObject method_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynfuse._recorder.function",
    .tp_basicsize = sizeof(MethodObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(MethodObject, vectorcall),
    .tp_dictoffset = offsetof(MethodObject, dict),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = method_get,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_traverse = method_traverse,
    .tp_clear = method_clear,
    .tp_dealloc = method_dealloc,
    .tp_getset = method_getset,
    .tp_repr = method_repr,
    .tp_doc = "A dynfuse function or method whose common case runs in C.",
};

static PyObject *new_method(PyObject *op, long order, PyObject *general)
{
    MethodObject *method = PyObject_GC_New(MethodObject, &method_type);
    if (method == NULL)
        return NULL;
    method->vectorcall = method_vectorcall;
    method->op = Py_NewRef(op);
    method->order = order;
    method->general = Py_NewRef(general);
    method->dict = NULL;
    PyObject_GC_Track(method);
    return (PyObject *)method;
}

/* fast_function(op, order, general): the function (or method: it binds as ``general`` does) that
   runs the common case of its order in C, and ``general`` when that declines. */
static PyObject *fast_function(PyObject *module, PyObject *args)
{
    PyObject *op, *general;
    const char *order_name;
    if (!PyArg_ParseTuple(args, "OsO", &op, &order_name, &general))
        return NULL;
    long order = 0;
    while (order_names[order] != NULL && strcmp(order_names[order], order_name) != 0)
        order++;
    int takes_op = order < ORDER_GETITEM || order == ORDER_REDUCE || order == ORDER_ONE_AXIS || order == ORDER_NUMPY;
    int op_fits = order == ORDER_UFUNC   ? PyDict_Check(op)
                  : order == ORDER_VALUE ? PyUnicode_CheckExact(op)
                                         : !takes_op || op != Py_None;
    if (order_names[order] == NULL || !op_fits || !PyCallable_Check(general)) {
        PyErr_Format(PyExc_ValueError, "fast_function: bad order %s, op or function", order_name);
        return NULL;
    }
    return new_method(op, order, general);
}

/* LazyArray's operator slots, pointed at its C methods. A Python class's slot looks its dunder method
   up and calls it (``x[i]`` finds ``__getitem__``); these call the installed C method at once, as
   NumPy's own slots are C. ``install_slots`` sets them after ``accelerate`` installs the methods;
   assigning any of the dunders later (``accelerate.pure_python``) makes Python reset that slot to
   its lookup, which calls whatever is assigned. Each slot keeps the one it replaced, for what its
   method does not take (a subclass's instance, ``del x[i]``). */
typedef struct {
    const char *forward, *reflected; /* LazyArray's dunders, either may be absent (NULL) */
    MethodObject *forward_method, *reflected_method;
    binaryfunc original;
} BinarySlot;

enum { SLOT_ADD, SLOT_SUBTRACT, SLOT_MULTIPLY, SLOT_DIVIDE, SLOT_MATMUL, SLOT_IN_PLACE_ADD, SLOT_IN_PLACE_SUBTRACT,
       SLOT_IN_PLACE_MULTIPLY, SLOT_IN_PLACE_DIVIDE, SLOT_SUBSCRIPT, BINARY_SLOTS };
static BinarySlot binary_slots[BINARY_SLOTS] = {
    [SLOT_ADD] = {"__add__", "__radd__"},
    [SLOT_SUBTRACT] = {"__sub__", "__rsub__"},
    [SLOT_MULTIPLY] = {"__mul__", "__rmul__"},
    [SLOT_DIVIDE] = {"__truediv__", "__rtruediv__"},
    [SLOT_MATMUL] = {"__matmul__", "__rmatmul__"},
    [SLOT_IN_PLACE_ADD] = {"__iadd__", NULL},
    [SLOT_IN_PLACE_SUBTRACT] = {"__isub__", NULL},
    [SLOT_IN_PLACE_MULTIPLY] = {"__imul__", NULL},
    [SLOT_IN_PLACE_DIVIDE] = {"__itruediv__", NULL},
    [SLOT_SUBSCRIPT] = {"__getitem__", NULL},
};

static PyObject *call_method(MethodObject *method, PyObject *self, PyObject *other)
{
    PyObject *args[2] = {self, other};
    return fast_method_call(method, args, 2, NULL);
}

static PyObject *binary_slot(int which, PyObject *first, PyObject *second)
{
    BinarySlot *slot = &binary_slots[which];
    if (Py_IS_TYPE(first, S.array_type))
        return slot->forward_method ? call_method(slot->forward_method, first, second) : slot->original(first, second);
    /* A subclass's instance first: Python's own protocol (its __add__ before LazyArray's __radd__) */
    if (Py_IS_TYPE(second, S.array_type) && slot->reflected_method && !PyObject_TypeCheck(first, S.array_type))
        return call_method(slot->reflected_method, second, first);
    return slot->original(first, second);
}

#define FAST_SLOT(which) \
    static PyObject *fast_slot_##which(PyObject *first, PyObject *second) { return binary_slot(which, first, second); }
FAST_SLOT(SLOT_ADD)
FAST_SLOT(SLOT_SUBTRACT)
FAST_SLOT(SLOT_MULTIPLY)
FAST_SLOT(SLOT_DIVIDE)
FAST_SLOT(SLOT_MATMUL)
FAST_SLOT(SLOT_IN_PLACE_ADD)
FAST_SLOT(SLOT_IN_PLACE_SUBTRACT)
FAST_SLOT(SLOT_IN_PLACE_MULTIPLY)
FAST_SLOT(SLOT_IN_PLACE_DIVIDE)
FAST_SLOT(SLOT_SUBSCRIPT)

/* Where each slot lives in a heap type, and its C function. */
static binaryfunc *binary_slot_address(PyHeapTypeObject *type, int which, binaryfunc *fast)
{
    switch (which) {
#define SLOT_AT(which, field) \
    case which:               \
        *fast = fast_slot_##which; \
        return &type->field;
    SLOT_AT(SLOT_ADD, as_number.nb_add)
    SLOT_AT(SLOT_SUBTRACT, as_number.nb_subtract)
    SLOT_AT(SLOT_MULTIPLY, as_number.nb_multiply)
    SLOT_AT(SLOT_DIVIDE, as_number.nb_true_divide)
    SLOT_AT(SLOT_MATMUL, as_number.nb_matrix_multiply)
    SLOT_AT(SLOT_IN_PLACE_ADD, as_number.nb_inplace_add)
    SLOT_AT(SLOT_IN_PLACE_SUBTRACT, as_number.nb_inplace_subtract)
    SLOT_AT(SLOT_IN_PLACE_MULTIPLY, as_number.nb_inplace_multiply)
    SLOT_AT(SLOT_IN_PLACE_DIVIDE, as_number.nb_inplace_true_divide)
    SLOT_AT(SLOT_SUBSCRIPT, as_mapping.mp_subscript)
#undef SLOT_AT
    }
    return NULL;
}

static MethodObject *setitem_method;
static objobjargproc original_ass_subscript;

static int fast_ass_subscript(PyObject *self, PyObject *index, PyObject *value)
{
    if (value == NULL || !Py_IS_TYPE(self, S.array_type) || setitem_method == NULL)
        return original_ass_subscript(self, index, value);
    PyObject *args[3] = {self, index, value};
    PyObject *done = fast_method_call(setitem_method, args, 3, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* The installed C method ``name`` of the type (a new reference), or NULL where it is another. */
static MethodObject *installed_method(PyTypeObject *type, const char *name)
{
    PyObject *found = name == NULL ? NULL : PyDict_GetItemString(type->tp_dict, name);
    return found != NULL && Py_IS_TYPE(found, &method_type) ? (MethodObject *)Py_NewRef(found) : NULL;
}

/* Unary operators and comparisons, as the binary slots above. */
enum { SLOT_NEGATIVE, SLOT_POSITIVE, SLOT_ABSOLUTE, SLOT_INVERT, UNARY_SLOTS };
static struct {
    const char *name;
    MethodObject *method;
    unaryfunc original;
} unary_slots[UNARY_SLOTS] = {
    [SLOT_NEGATIVE] = {"__neg__"}, [SLOT_POSITIVE] = {"__pos__"}, [SLOT_ABSOLUTE] = {"__abs__"}, [SLOT_INVERT] = {"__invert__"},
};

static PyObject *unary_slot(int which, PyObject *self)
{
    MethodObject *method = unary_slots[which].method;
    if (!Py_IS_TYPE(self, S.array_type) || method == NULL)
        return unary_slots[which].original(self);
    return fast_method_call(method, &self, 1, NULL);
}

#define FAST_UNARY_SLOT(which) \
    static PyObject *fast_unary_##which(PyObject *self) { return unary_slot(which, self); }
FAST_UNARY_SLOT(SLOT_NEGATIVE)
FAST_UNARY_SLOT(SLOT_POSITIVE)
FAST_UNARY_SLOT(SLOT_ABSOLUTE)
FAST_UNARY_SLOT(SLOT_INVERT)

static unaryfunc *unary_slot_address(PyHeapTypeObject *type, int which, unaryfunc *fast)
{
    switch (which) {
    case SLOT_NEGATIVE:
        *fast = fast_unary_SLOT_NEGATIVE;
        return &type->as_number.nb_negative;
    case SLOT_POSITIVE:
        *fast = fast_unary_SLOT_POSITIVE;
        return &type->as_number.nb_positive;
    case SLOT_ABSOLUTE:
        *fast = fast_unary_SLOT_ABSOLUTE;
        return &type->as_number.nb_absolute;
    case SLOT_INVERT:
        *fast = fast_unary_SLOT_INVERT;
        return &type->as_number.nb_invert;
    }
    return NULL;
}

static const char *const comparison_names[] = {
    [Py_LT] = "__lt__", [Py_LE] = "__le__", [Py_EQ] = "__eq__", [Py_NE] = "__ne__", [Py_GT] = "__gt__", [Py_GE] = "__ge__",
};
static MethodObject *comparison_methods[6];
static richcmpfunc original_richcompare;

static PyObject *fast_richcompare(PyObject *self, PyObject *other, int op)
{
    MethodObject *method = op >= 0 && op < 6 ? comparison_methods[op] : NULL;
    if (!Py_IS_TYPE(self, S.array_type) || method == NULL)
        return original_richcompare(self, other, op);
    return call_method(method, self, other);
}

/* len(x): the first extent, as LazyArray.__len__ gives it. */
static Py_ssize_t fast_length(PyObject *self)
{
    PyObject *node = ARRAY_SLOT(self, ARRAY_NODE), *shape = node == NULL ? NULL : NODE_SLOT(node, SHAPE);
    if (shape == NULL || !PyTuple_CheckExact(shape)) {
        PyErr_SetString(PyExc_TypeError, "LazyArray has no shape");
        return -1;
    }
    if (PyTuple_GET_SIZE(shape) == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized object");
        return -1;
    }
    return PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
}

/* install_slots(): point LazyArray's slots at the C methods installed now. */
static PyObject *install_slots(PyObject *module, PyObject *unused)
{
    BIND_CHECK();
    PyHeapTypeObject *type = (PyHeapTypeObject *)S.array_type;
    for (int which = 0; which < BINARY_SLOTS; which++) {
        BinarySlot *slot = &binary_slots[which];
        binaryfunc fast, *address = binary_slot_address(type, which, &fast);
        MethodObject *forward = installed_method(S.array_type, slot->forward);
        MethodObject *reflected = installed_method(S.array_type, slot->reflected);
        Py_XSETREF(slot->forward_method, forward);
        Py_XSETREF(slot->reflected_method, reflected);
        if (*address != fast && *address != NULL)
            slot->original = *address;
        if (slot->original != NULL && (forward != NULL || reflected != NULL))
            *address = fast;
    }
    for (int which = 0; which < UNARY_SLOTS; which++) {
        unaryfunc fast, *address = unary_slot_address(type, which, &fast);
        MethodObject *method = installed_method(S.array_type, unary_slots[which].name);
        Py_XSETREF(unary_slots[which].method, method);
        if (*address != fast && *address != NULL)
            unary_slots[which].original = *address;
        if (unary_slots[which].original != NULL && method != NULL)
            *address = fast;
    }
    int comparisons = 0;
    for (int op = 0; op < 6; op++) {
        MethodObject *method = installed_method(S.array_type, comparison_names[op]);
        comparisons += method != NULL;
        Py_XSETREF(comparison_methods[op], method);
    }
    if (S.array_type->tp_richcompare != fast_richcompare && S.array_type->tp_richcompare != NULL)
        original_richcompare = S.array_type->tp_richcompare;
    if (original_richcompare != NULL && comparisons > 0)
        S.array_type->tp_richcompare = fast_richcompare;
    if (type->as_mapping.mp_length != NULL) /* Python's lookup of LazyArray.__len__, which this does */
        type->as_mapping.mp_length = fast_length;
    if (type->as_sequence.sq_length != NULL)
        type->as_sequence.sq_length = fast_length;
    MethodObject *setitem = installed_method(S.array_type, "__setitem__");
    Py_XSETREF(setitem_method, setitem);
    if (type->as_mapping.mp_ass_subscript != fast_ass_subscript && type->as_mapping.mp_ass_subscript != NULL)
        original_ass_subscript = type->as_mapping.mp_ass_subscript;
    if (original_ass_subscript != NULL && setitem != NULL)
        type->as_mapping.mp_ass_subscript = fast_ass_subscript;
    Py_RETURN_NONE;
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
    if (init_node(args[0], args[1], args[2], args[3], args[4], args[5], NULL) < 0)
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

/* trace.held_ancestors(node, deep): the positions in node.ancestors of the deep intermediates the
   program holds, each referenced more often than its trace itself references it. (Python's
   ``sys.getrefcount`` sees one reference more, its argument's.) */
static PyObject *held_ancestors(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs != 2 || !PyObject_TypeCheck(args[0], S.node_type) || !PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "held_ancestors takes a node and a tuple of (position, count) pairs");
        return NULL;
    }
    PyObject *ancestors = NODE_SLOT(args[0], ANCESTORS), *deep = args[1];
    Py_ssize_t count = PyTuple_GET_SIZE(deep), held = 0, positions[64];
    if (ancestors == NULL || !PyTuple_CheckExact(ancestors) || count > 64)
        return PyObject_CallFunctionObjArgs(S.held_ancestors, args[0], deep, NULL);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(deep, i);
        Py_ssize_t position, inside;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2
            || !int_value(PyTuple_GET_ITEM(pair, 0), &position) || !int_value(PyTuple_GET_ITEM(pair, 1), &inside)
            || position < 0 || position >= PyTuple_GET_SIZE(ancestors)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "held_ancestors: a position outside the node's ancestors");
            return NULL;
        }
        if (Py_REFCNT(PyTuple_GET_ITEM(ancestors, position)) > inside)
            positions[held++] = position;
    }
    return int_tuple(positions, held);
}

/* Node.become_leaf(buffer, key) for a node the caller holds. */
static void become_leaf(PyObject *node, PyObject *buffer, PyObject *key)
{
    PyObject *values[NODE_SLOTS] = {NULL};
    values[OP] = S.buffer_op;
    values[INPUTS] = values[PARAMS] = values[LEAVES] = values[ANCESTORS] = S.empty;
    values[BUFFER] = buffer;
    values[DEPTH] = S.zero;
    values[KEY] = key;
    for (int slot = 0; slot < NODE_SLOTS; slot++)
        if (values[slot] != NULL)
            set_slot(node, S.node_offsets[slot], Py_NewRef(values[slot]));
}

/* A fresh C-contiguous array of ``layout``, a (shape, dtype) pair: from the host pool where it is
   large (host_pool.empty: mapped already, so the kernel's first write faults no page in); NULL with
   an error set. */
static PyObject *empty_of(PyObject *layout)
{
    npy_intp dims[NPY_MAXDIMS];
    PyObject *shape, *dtype;
    if (!PyTuple_CheckExact(layout) || PyTuple_GET_SIZE(layout) != 2 || !PyTuple_CheckExact(shape = PyTuple_GET_ITEM(layout, 0))
        || !PyArray_DescrCheck(dtype = PyTuple_GET_ITEM(layout, 1)) || PyTuple_GET_SIZE(shape) > NPY_MAXDIMS) {
        PyErr_SetString(PyExc_TypeError, "launch_replay: an output layout is not a (shape, dtype) pair");
        return NULL;
    }
    int ndim = (int)PyTuple_GET_SIZE(shape);
    for (int axis = 0; axis < ndim; axis++)
        if (!int_value(PyTuple_GET_ITEM(shape, axis), &dims[axis]) || dims[axis] < 0) {
            PyErr_SetString(PyExc_TypeError, "launch_replay: a shape that is not of non-negative ints");
            return NULL;
        }
    Py_ssize_t least = PyLong_AsSsize_t(S.pool_min_bytes);
    if (least == -1 && PyErr_Occurred())
        return NULL;
    if (PyArray_MultiplyList(dims, ndim) * PyDataType_ELSIZE((PyArray_Descr *)dtype) >= least)
        return PyObject_CallFunctionObjArgs(S.pooled_empty, shape, dtype, NULL);
    Py_INCREF(dtype); /* PyArray_Empty steals it */
    return PyArray_Empty(ndim, dims, (PyArray_Descr *)dtype, 0);
}

/* A view of ``buffer`` at ``placement``, (byte offset, shape, strides, dtype), which
   replay._placement found inside the buffer's bytes for a leaf of this layout; NULL with an error set. */
static PyObject *placed_view(PyObject *buffer, PyObject *placement)
{
    npy_intp dims[NPY_MAXDIMS], steps[NPY_MAXDIMS];
    Py_ssize_t offset;
    PyObject *shape, *strides, *dtype;
    if (!PyArray_Check(buffer) || !PyTuple_CheckExact(placement) || PyTuple_GET_SIZE(placement) != 4
        || !int_value(PyTuple_GET_ITEM(placement, 0), &offset) || !PyTuple_CheckExact(shape = PyTuple_GET_ITEM(placement, 1))
        || !PyTuple_CheckExact(strides = PyTuple_GET_ITEM(placement, 2)) || !PyArray_DescrCheck(dtype = PyTuple_GET_ITEM(placement, 3))
        || PyTuple_GET_SIZE(shape) > NPY_MAXDIMS || PyTuple_GET_SIZE(strides) != PyTuple_GET_SIZE(shape)) {
        PyErr_SetString(PyExc_TypeError, "launch_replay: a load's placement is not (offset, shape, strides, dtype) in an array");
        return NULL;
    }
    int ndim = (int)PyTuple_GET_SIZE(shape);
    for (int axis = 0; axis < ndim; axis++)
        if (!int_value(PyTuple_GET_ITEM(shape, axis), &dims[axis]) || !int_value(PyTuple_GET_ITEM(strides, axis), &steps[axis])) {
            PyErr_SetString(PyExc_TypeError, "launch_replay: a placement's shape or strides are not ints");
            return NULL;
        }
    Py_INCREF(dtype); /* PyArray_NewFromDescr steals it */
    PyObject *view = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)dtype, ndim, dims, steps,
                                          PyArray_BYTES((PyArrayObject *)buffer) + offset, 0, NULL);
    if (view != NULL && PyArray_SetBaseObject((PyArrayObject *)view, Py_NewRef(buffer)) < 0)
        Py_CLEAR(view);
    return view;
}

/* One kernel of a launch plan, given ``step`` (positions, loads, run, layouts, placements): the
   values at ``positions`` (below the count of ``leaves``, a leaf's buffer; above, an output an
   earlier kernel of the plan made, in ``made``), the first ``loads`` the kernel's inputs, each read
   as it is or, where ``placements`` has one for it, through the view it places, the rest its
   parameters; fresh outputs of ``layouts``, appended to ``made``; ``run(inputs, params, outputs)``
   (the kernel's C call). 1 where it ran, 0 where ``run`` declined, -1 on an error. */
static int launch_step(PyObject *step, PyObject *leaves, PyObject *made)
{
    PyObject *positions, *run, *layouts, *placements;
    Py_ssize_t loads, leaf_count = PyTuple_GET_SIZE(leaves), earlier = PyList_GET_SIZE(made);
    if (!PyTuple_CheckExact(step) || PyTuple_GET_SIZE(step) != 5 || !PyTuple_CheckExact(positions = PyTuple_GET_ITEM(step, 0))
        || !int_value(PyTuple_GET_ITEM(step, 1), &loads) || !PyTuple_CheckExact(layouts = PyTuple_GET_ITEM(step, 3))
        || loads < 0 || loads > PyTuple_GET_SIZE(positions)
        || ((placements = PyTuple_GET_ITEM(step, 4)) != Py_None
            && (!PyTuple_CheckExact(placements) || PyTuple_GET_SIZE(placements) != loads))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "launch_replay: a malformed kernel launch");
        return -1;
    }
    run = PyTuple_GET_ITEM(step, 2);
    Py_ssize_t count = PyTuple_GET_SIZE(positions);
    PyObject *inputs = PyList_New(loads), *params = PyList_New(count - loads);
    PyObject *outputs = PyList_New(PyTuple_GET_SIZE(layouts));
    int result = -1;
    if (inputs == NULL || params == NULL || outputs == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t position = -1;
        int_value(PyTuple_GET_ITEM(positions, i), &position);
        PyObject *buffer = position < 0 ? NULL
                           : position < leaf_count ? NODE_SLOT(PyTuple_GET_ITEM(leaves, position), BUFFER)
                           : position - leaf_count < earlier ? PyList_GET_ITEM(made, position - leaf_count)
                           : NULL;
        if (buffer == NULL) {
            PyErr_SetString(PyExc_ValueError, "launch_replay: a position neither a leaf with a buffer nor an earlier output");
            goto done;
        }
        PyObject *placement = i < loads && placements != Py_None ? PyTuple_GET_ITEM(placements, i) : Py_None;
        PyObject *value = placement == Py_None ? Py_NewRef(buffer) : placed_view(buffer, placement);
        if (value == NULL)
            goto done;
        PyList_SET_ITEM(i < loads ? inputs : params, i < loads ? i : i - loads, value);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(layouts); i++) {
        PyObject *output = empty_of(PyTuple_GET_ITEM(layouts, i));
        if (output == NULL)
            goto done;
        PyList_SET_ITEM(outputs, i, output);
    }
    PyObject *call[3] = {inputs, params, outputs};
    PyObject *ran = PyObject_Vectorcall(run, call, 3, NULL);
    if (ran == NULL)
        goto done;
    result = PyObject_IsTrue(ran);
    Py_DECREF(ran);
    for (Py_ssize_t i = 0; result == 1 && i < PyList_GET_SIZE(outputs); i++)
        if (PyList_Append(made, PyList_GET_ITEM(outputs, i)) < 0)
            result = -1;
done:
    Py_XDECREF(inputs);
    Py_XDECREF(params);
    Py_XDECREF(outputs);
    return result;
}

/* replay.KernelReplay.materialize's launch, and a plan's replay of compiled kernels alone
   (replay.PlanReplay), for a run whose launch ``plan`` (``launch_plan``) is (steps, stores,
   result_keys, fused_ops, verdict): each kernel of ``steps`` launched in turn (launch_step), then
   each (output, position) of ``stores`` (an output of any of them, counted in the order they made
   them) made the leaf of the node (-1) or of its ancestor there, with its result key; the sites
   whose nodes it computed told ``verdict``. False where a kernel declined or raised a
   floating-point flag: nothing changed (the Python path runs it again, and heeds the flag). */
static PyObject *launch_replay(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    PyObject *node, *plan, *steps, *stores, *keys;
    Py_ssize_t fused, verdict;
    if (nargs != 2 || !PyObject_TypeCheck(node = args[0], S.node_type) || !PyTuple_CheckExact(plan = args[1])
        || PyTuple_GET_SIZE(plan) != 5) {
        PyErr_SetString(PyExc_TypeError, "launch_replay takes a node and a launch plan");
        return NULL;
    }
    steps = PyTuple_GET_ITEM(plan, 0), stores = PyTuple_GET_ITEM(plan, 1), keys = PyTuple_GET_ITEM(plan, 2);
    PyObject *leaves = NODE_SLOT(node, LEAVES), *ancestors = NODE_SLOT(node, ANCESTORS);
    if (!PyTuple_CheckExact(steps) || !PyTuple_CheckExact(stores) || !PyTuple_CheckExact(keys)
        || PyTuple_GET_SIZE(keys) != PyTuple_GET_SIZE(stores) || !int_value(PyTuple_GET_ITEM(plan, 3), &fused)
        || !int_value(PyTuple_GET_ITEM(plan, 4), &verdict) || leaves == NULL || !PyTuple_CheckExact(leaves)
        || ancestors == NULL || !PyTuple_CheckExact(ancestors)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "launch_replay: a malformed launch plan");
        return NULL;
    }
    Py_ssize_t stored = PyTuple_GET_SIZE(stores);
    PyObject *made = PyList_New(0), *result = NULL;
    PyObject **targets = PyMem_Calloc(stored ? stored : 1, sizeof(PyObject *));
    Py_ssize_t *slots = PyMem_Calloc(stored ? stored : 1, sizeof(Py_ssize_t));
    if (made == NULL || targets == NULL || slots == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < stored; i++) {
        PyObject *store = PyTuple_GET_ITEM(stores, i);
        Py_ssize_t output, at;
        if (!PyTuple_CheckExact(store) || PyTuple_GET_SIZE(store) != 2 || !int_value(PyTuple_GET_ITEM(store, 0), &output)
            || !int_value(PyTuple_GET_ITEM(store, 1), &at) || output < 0 || at < -1 || at >= PyTuple_GET_SIZE(ancestors)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "launch_replay: a store outside the kernels' outputs or the trace");
            goto done;
        }
        slots[i] = output;
        /* Held here: a node made a leaf first lets go of the ancestors the later stores name */
        targets[i] = Py_NewRef(at < 0 ? node : PyTuple_GET_ITEM(ancestors, at));
    }
    int launched = 1;
    for (Py_ssize_t i = 0; launched && i < PyTuple_GET_SIZE(steps); i++) {
        launched = launch_step(PyTuple_GET_ITEM(steps, i), leaves, made);
        if (launched < 0)
            goto done;
        /* A floating-point flag raised: the outputs are dropped, and the Python path heeds it (and clears it) */
        launched = launched && *S.flags_word == 0;
    }
    for (Py_ssize_t i = 0; launched && i < stored; i++)
        if (slots[i] >= PyList_GET_SIZE(made)) {
            PyErr_SetString(PyExc_ValueError, "launch_replay: a store outside the kernels' outputs");
            goto done;
        }
    if (launched) {
        if (recent_count) /* the trace's nodes: before they let go of it */
            settle(verdict, node, ancestors);
        for (Py_ssize_t i = 0; i < stored; i++)
            become_leaf(targets[i], PyList_GET_ITEM(made, slots[i]), PyTuple_GET_ITEM(keys, i));
        tallies[TALLY_REPLAYS]++;
        tallies[TALLY_KERNELS_LAUNCHED] += PyTuple_GET_SIZE(steps);
        tallies[TALLY_MATERIALIZATIONS]++;
        tallies[TALLY_FUSED_OPS] += fused;
    }
    result = PyBool_FromLong(launched);
done:
    if (targets != NULL)
        for (Py_ssize_t i = 0; i < stored; i++)
            Py_XDECREF(targets[i]);
    PyMem_Free(targets);
    PyMem_Free(slots);
    Py_XDECREF(made);
    return result;
}

/* ``node`` computed by the launch its structure kept (execute.materialize's common case, without
   its Python frames), given (node, backend, replays): its replay key on ``backend`` (a name), the
   replay kept under it in ``replays`` (replay._replays, made the most recently used), the run for
   the deep intermediates the program holds, and that run's launch in C (launch_replay). False
   where any of them is missing, or the launch failed (the Python path then runs it, and forgets
   the replay where it fails again); MemoryError is raised. */
static PyObject *replay_node(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *key_args[2] = {args[1], args[0]};
    PyObject *key = replay_key(module, key_args, 2), *held = NULL, *deep = NULL, *runs = NULL, *plan = NULL;
    PyObject *result = NULL;
    if (key == NULL || key == Py_None)
        goto done;
    PyObject *kept = PyDict_GetItemWithError(args[2], key); /* borrowed */
    if (kept == NULL)
        goto done;
    Py_INCREF(kept);
    PyObject *moved = PyObject_CallMethodOneArg(args[2], S.str_move_to_end, key);
    Py_XDECREF(moved);
    deep = moved == NULL ? NULL : PyObject_GetAttr(kept, S.str_deep);
    runs = deep == NULL ? NULL : PyObject_GetAttr(kept, S.str_runs);
    Py_DECREF(kept);
    if (runs == NULL || !PyDict_Check(runs))
        goto done;
    if (PyTuple_Check(deep) && PyTuple_GET_SIZE(deep) > 0) {
        PyObject *held_args[2] = {args[0], deep};
        held = held_ancestors(module, held_args, 2);
    } else {
        held = Py_NewRef(S.empty);
    }
    PyObject *run = held == NULL ? NULL : PyDict_GetItemWithError(runs, held); /* borrowed */
    plan = run == NULL ? NULL : PyObject_GetAttr(run, S.str_launch_plan);
    if (plan == NULL || plan == Py_None)
        goto done;
    PyObject *launch_args[2] = {args[0], plan};
    result = launch_replay(module, launch_args, 2);
done:
    Py_XDECREF(key);
    Py_XDECREF(held);
    Py_XDECREF(deep);
    Py_XDECREF(runs);
    Py_XDECREF(plan);
    if (result == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError))
            return NULL;
        PyErr_Clear();
        result = Py_NewRef(Py_False);
    }
    return result;
}

/* trace.Node.group(members) for pending host nodes, none a view, which execute.materialize checked:
   a new node; None where the group would have no structure (a member without one, or too many
   leaves and ancestors), as Python then finds no replay for it either. */
static PyObject *group_of(PyObject *members)
{
    Py_ssize_t count = PyTuple_GET_SIZE(members), leaf_count = 0, ancestor_count = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *member = PyTuple_GET_ITEM(members, i);
        if (!PyObject_TypeCheck(member, S.node_type) || !complete_node(member))
            return NULL;
        if (NODE_SLOT(member, KEY) == Py_None)
            return Py_NewRef(Py_None);
        leaf_count += PyTuple_GET_SIZE(NODE_SLOT(member, LEAVES));
        ancestor_count += PyTuple_GET_SIZE(NODE_SLOT(member, ANCESTORS)) + 1;
    }
    static KeptInt kept_key_limit;
    Py_ssize_t key_limit = kept_module_int(S.trace_module, S.str_key_limit, &kept_key_limit);
    if (key_limit == -1 && PyErr_Occurred())
        return NULL;
    if (count == 0 || leaf_count + ancestor_count > key_limit)
        return Py_NewRef(Py_None);
    PyObject *keys = PyTuple_New(count), *leaves = PyTuple_New(leaf_count), *ancestors = PyTuple_New(ancestor_count);
    PyObject *shared = PyTuple_New(ancestor_count), *description = NULL, *key = NULL, *group = NULL;
    if (keys == NULL || leaves == NULL || ancestors == NULL || shared == NULL)
        goto done;
    Py_ssize_t leaf = 0, ancestor = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *member = PyTuple_GET_ITEM(members, i), *own = NODE_SLOT(member, LEAVES);
        PyTuple_SET_ITEM(keys, i, Py_NewRef(NODE_SLOT(member, KEY)));
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(own); j++)
            PyTuple_SET_ITEM(leaves, leaf++, Py_NewRef(PyTuple_GET_ITEM(own, j)));
        own = NODE_SLOT(member, ANCESTORS);
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(own); j++)
            PyTuple_SET_ITEM(ancestors, ancestor++, Py_NewRef(PyTuple_GET_ITEM(own, j)));
        PyTuple_SET_ITEM(ancestors, ancestor++, Py_NewRef(member));
    }
    for (Py_ssize_t i = 0; i < ancestor_count; i++) { /* trace.first_positions */
        PyObject *node = PyTuple_GET_ITEM(ancestors, i);
        Py_ssize_t first = 0;
        while (PyTuple_GET_ITEM(ancestors, first) != node)
            first++;
        PyObject *position = PyLong_FromSsize_t(first);
        if (position == NULL)
            goto done;
        PyTuple_SET_ITEM(shared, i, position);
    }
    description = PyTuple_Pack(3, S.group_op, keys, shared);
    key = description == NULL ? NULL : intern_structure(description);
    group = key == NULL ? NULL : S.node_type->tp_alloc(S.node_type, 0);
    if (group != NULL) {
        PyObject *device = NODE_SLOT(PyTuple_GET_ITEM(members, 0), DEVICE);
        set_node_slots(group, S.group_op, members, S.empty, S.empty, Py_None, Py_None, device, Py_NewRef(S.zero),
                       Py_NewRef(key), Py_NewRef(leaves), Py_NewRef(ancestors), Py_NewRef(Py_None));
    }
done:
    Py_XDECREF(keys);
    Py_XDECREF(leaves);
    Py_XDECREF(ancestors);
    Py_XDECREF(shared);
    Py_XDECREF(description);
    Py_XDECREF(key);
    return group;
}

/* replay_node for several pending host nodes, none a view, given (members, backend, replays): their
   group's kept launch. */
static PyObject *replay_group(PyObject *module, PyObject *const *args)
{
    PyObject *group = group_of(args[0]);
    if (group == NULL || group == Py_None)
        return group == NULL ? NULL : (Py_DECREF(group), Py_NewRef(Py_False));
    PyObject *now_args[3] = {group, args[1], args[2]};
    PyObject *result = replay_node(module, now_args, 3);
    Py_DECREF(group);
    return result;
}

/* execute._loop_run's common case, given (nodes, backend, replays): ``nodes`` with the values of
   the run of the program's loop this thread has pending (pending_run), by their kept launch, as
   one node's or as a group's; then the run's views taken of what they view (execute.take_views).
   False where its replay is not kept. */
static PyObject *replay_run(PyObject *module, PyObject *const *args)
{
    PyObject *run = pending_run(module, NULL), *members = NULL, *result = NULL;
    if (run == NULL)
        return NULL;
    PyObject *values = PyTuple_GET_ITEM(run, 0), *views = PyTuple_GET_ITEM(run, 1);
    members = PyList_GetSlice(values, 0, PyList_GET_SIZE(values));
    for (Py_ssize_t i = 0; members != NULL && i < PyTuple_GET_SIZE(args[0]); i++) {
        PyObject *node = PyTuple_GET_ITEM(args[0], i);
        int listed = PySequence_Contains(values, node);
        if (listed < 0 || (!listed && PyList_Append(members, node) < 0))
            Py_CLEAR(members);
    }
    if (members == NULL)
        goto done;
    if (PyList_GET_SIZE(members) == 1) {
        PyObject *now_args[3] = {PyList_GET_ITEM(members, 0), args[1], args[2]};
        result = replay_node(module, now_args, 3);
    } else { /* a read of several values pays nothing (verdict_cap); the loop coming back may */
        PyObject *group = PyList_AsTuple(members);
        PyObject *now_args[3] = {group, args[1], args[2]};
        Py_ssize_t cap = verdict_cap;
        if (PyTuple_GET_SIZE(args[0]) > 0 && verdict_cap > 0)
            verdict_cap = 0;
        result = group == NULL ? NULL : replay_group(module, now_args);
        verdict_cap = cap;
        Py_XDECREF(group);
    }
    if (result == Py_True && PyList_GET_SIZE(views) > 0) {
        PyObject *taken = PyObject_CallOneArg(S.take_views, views);
        if (taken == NULL)
            Py_CLEAR(result);
        Py_XDECREF(taken);
    }
done:
    Py_DECREF(run);
    Py_XDECREF(members);
    return result;
}

/* replay.replay_now(node, backend, replays[, run]): replay_node; while what sites recorded is
   pending, with the run of the program's loop it belongs to (replay_run), unless ``run`` is False
   (execute._loop_run, which gives the run's values itself). */
static PyObject *replay_now(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs < 3 || nargs > 4 || !PyObject_TypeCheck(args[0], S.node_type) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "replay_now takes a node, a backend name, the replays and whether to take the run");
        return NULL;
    }
    if (recent_count == 0 || (nargs == 4 && args[3] == Py_False) || pending_run_is(args[0]))
        return replay_node(module, args, nargs);
    PyObject *nodes = PyTuple_Pack(1, args[0]);
    PyObject *run_args[3] = {nodes, args[1], args[2]};
    PyObject *result = nodes == NULL ? NULL : replay_run(module, run_args);
    Py_XDECREF(nodes);
    return result;
}

/* replay.replay_group_now(members, backend, replays[, run]): replay_now for several pending host
   nodes, none a view, as their group. */
static PyObject *replay_group_now(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs < 3 || nargs > 4 || !PyTuple_CheckExact(args[0]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "replay_group_now takes a tuple of nodes, a backend name, the replays and whether to take the run");
        return NULL;
    }
    int run = recent_count > 0 && !(nargs == 4 && args[3] == Py_False);
    return run ? replay_run(module, args) : replay_group(module, args);
}

static PyObject *structure_id(PyObject *module, PyObject *description)
{
    BIND_CHECK();
    return intern_structure(description);
}

static PyObject *bind(PyObject *module, PyObject *args, PyObject *kwargs)
{
    /* Each object by name; a type, where it must be of one (NULL: any). */
    struct {
        const char *name;
        PyObject **target;
        PyTypeObject *type;
    } objects[] = {
        {"Node", (PyObject **)&S.node_type, &PyType_Type},
        {"LazyArray", (PyObject **)&S.array_type, &PyType_Type},
        {"trace_module", &S.trace_module, NULL},
        {"config_module", &S.config_module, NULL},
        {"structure_ids", &S.structure_ids, &PyDict_Type},
        {"new_structure_id", &S.new_structure_id, NULL},
        {"thread_state", &S.thread_state, NULL},
        {"start_thread", &S.start_thread, NULL},
        {"scalar_op", &S.scalar_op, NULL},
        {"common_dtypes", &S.common_dtypes, &PyDict_Type},
        {"common_result", &S.common_result, NULL},
        {"bound_depth", &S.bound_depth, NULL},
        {"mixed_devices", &S.mixed_devices, NULL},
        {"getitem_op", &S.getitem_op, NULL},
        {"transpose_op", &S.transpose_op, NULL},
        {"reshape_op", &S.reshape_op, NULL},
        {"astype_op", &S.astype_op, NULL},
        {"masked_select_op", &S.masked_select_op, NULL},
        {"common_reductions", &S.common_reductions, &PyDict_Type},
        {"common_reduction", &S.common_reduction, NULL},
        {"common_casts", &S.common_casts, &PyDict_Type},
        {"common_cast", &S.common_cast, NULL},
        {"host", &S.host, NULL},
        {"direct_elements", &S.direct_elements, NULL},
        {"numpy_scalar", &S.numpy_scalar, &PyType_Type},
        {"scalars", &S.scalars, &PyFrozenSet_Type},
        {"writers", &S.writers, &PyFrozenSet_Type},
        {"declined", &S.declined, NULL},
        {"large_made", &S.large_made, NULL},
        {"buffer_op", &S.buffer_op, NULL},
        {"pending", &S.pending, NULL},
        {"registry_module", &S.registry_module, NULL},
        {"matmul", &S.matmul, NULL},
        {"dot", &S.dot, NULL},
        {"held_ancestors", &S.held_ancestors, NULL},
        {"package_path", &S.package_path, &PyUnicode_Type},
        {"materialize_carried", &S.materialize_carried, NULL},
        {"group_op", &S.group_op, NULL},
        {"python_pending_run", &S.python_pending_run, NULL},
        {"view_ops", &S.view_ops, &PyFrozenSet_Type},
        {"take_views", &S.take_views, NULL},
        {"operator_into_region_limit", &S.operator_into_region_limit, NULL},
        {"pooled_empty", &S.pooled_empty, NULL},
        {"pool_min_bytes", &S.pool_min_bytes, &PyLong_Type},
        {"lock", &S.lock, NULL},
        {"replays", &S.replays, NULL},
        {"errstate_var", &S.errstate_var, NULL},
        {"float_flags", &S.float_flags, NULL},
    };
    enum { COUNT = sizeof(objects) / sizeof(objects[0]) };
    PyObject *values[COUNT];
    if (S.bound) {
        PyErr_SetString(PyExc_RuntimeError, "dynfuse._recorder is bound once");
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL || PyDict_GET_SIZE(kwargs) != COUNT) {
        PyErr_Format(PyExc_TypeError, "bind takes the %d objects by name", (int)COUNT);
        return NULL;
    }
    for (int i = 0; i < COUNT; i++) {
        values[i] = PyDict_GetItemString(kwargs, objects[i].name);
        if (values[i] == NULL || (objects[i].type != NULL && !PyObject_TypeCheck(values[i], objects[i].type))) {
            PyErr_Format(PyExc_TypeError, "bind: %s is missing or of the wrong type", objects[i].name);
            return NULL;
        }
    }
    if (slot_offsets((PyTypeObject *)values[0], node_slot_names, S.node_offsets, NODE_SLOTS) < 0
        || slot_offsets((PyTypeObject *)values[1], array_slot_names, S.array_offsets, ARRAY_SLOTS) < 0)
        return NULL;
    static const char *const recordings_name[] = {"_recordings"}, *const refs_name[] = {"refs"};
    PyObject *recording_type = PyObject_GetAttrString(PyDict_GetItemString(kwargs, "trace_module"), "_Recording");
    if (recording_type == NULL)
        return NULL;
    int read = PyType_Check(recording_type)
               && slot_offsets(Py_TYPE(PyDict_GetItemString(kwargs, "pending")), recordings_name, &S.recordings_offset, 1) == 0
               && slot_offsets((PyTypeObject *)recording_type, refs_name, &S.refs_offset, 1) == 0;
    if (!read) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "bind: trace._Recording is not a class");
        Py_DECREF(recording_type);
        return NULL;
    }
    S.recording_type = (PyTypeObject *)recording_type; /* held for the process */
    if (values[COUNT - 2] != Py_None && !PyContextVar_CheckExact(values[COUNT - 2])) {
        PyErr_SetString(PyExc_TypeError, "bind: errstate_var is not a context variable");
        return NULL;
    }
    Py_buffer word;
    if (PyObject_GetBuffer(values[COUNT - 1], &word, PyBUF_WRITABLE) < 0)
        return NULL;
    int one_word = word.len == sizeof(int64_t);
    S.flags_word = (volatile int64_t *)word.buf; /* float_errors.FLAGS never resizes: held for the process */
    PyBuffer_Release(&word);
    if (!one_word) {
        PyErr_SetString(PyExc_TypeError, "bind: float_flags is not one 8-byte word");
        return NULL;
    }
    for (int i = 0; i < COUNT; i++)
        *objects[i].target = Py_NewRef(values[i]);
    if (droppable_layout(S.node_type, &node_layout)) {
        S.node_type->tp_alloc = node_alloc;
        S.node_type->tp_dealloc = node_dealloc;
    }
    if (droppable_layout(S.array_type, &array_layout)) {
        S.array_type->tp_alloc = lazy_array_alloc;
        S.array_type->tp_dealloc = lazy_array_dealloc;
    }
    S.bound = 1;
    Py_RETURN_NONE;
}

/* direct.view(array, viewed, keeps_scalar=True) */
static PyObject *view(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    BIND_CHECK();
    if (nargs < 2 || nargs > 3 || !Py_IS_TYPE(args[0], S.array_type) || !PyArray_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "view takes a LazyArray, an ndarray and whether a scalar stays one");
        return NULL;
    }
    int keeps_scalar = nargs == 3 ? PyObject_IsTrue(args[2]) : 1;
    return keeps_scalar < 0 ? NULL : direct_view(args[0], args[1], keeps_scalar);
}

/* tiers.direct_elements(), kept while the settings it reads are unchanged (direct_limit) */
static PyObject *direct_elements(PyObject *module, PyObject *unused)
{
    BIND_CHECK();
    Py_ssize_t limit = direct_limit();
    return limit == -1 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(limit);
}

/* direct.fresh(value) */
static PyObject *fresh(PyObject *module, PyObject *value)
{
    BIND_CHECK();
    if (!PyArray_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "fresh takes an ndarray");
        return NULL;
    }
    return leaf_array(value, 0);
}

/* direct.result(value) */
static PyObject *result(PyObject *module, PyObject *value)
{
    BIND_CHECK();
    return direct_result(Py_NewRef(value));
}

/* stats' view of the tallies: their counts by name, and their reset. */
static PyObject *read_tallies(PyObject *module, PyObject *unused)
{
    PyObject *counts = PyDict_New();
    for (int i = 0; counts != NULL && i < TALLIES; i++) {
        PyObject *value = PyLong_FromSsize_t(tallies[i]);
        if (value == NULL || PyDict_SetItemString(counts, tally_names[i], value) < 0)
            Py_CLEAR(counts);
        Py_XDECREF(value);
    }
    return counts;
}

static PyObject *reset_tallies(PyObject *module, PyObject *unused)
{
    memset(tallies, 0, sizeof(tallies));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"tallies", read_tallies, METH_NOARGS, "The counts kept in C, by stats name."},
    {"install_slots", install_slots, METH_NOARGS, "Point LazyArray's operator slots at its C methods."},
    {"reset_tallies", reset_tallies, METH_NOARGS, "Zero the counts kept in C."},
    {"result", result, METH_O, "direct.result in C."},
    {"fresh", fresh, METH_O, "direct.fresh in C."},
    {"viewed_by_numpy", viewed_by_numpy, METH_O, "direct.viewed_by_numpy in C."},
    {"numpy_call", (PyCFunction)(void (*)(void))numpy_call, METH_FASTCALL, "direct.numpy_call in C."},
    {"run_strips", (PyCFunction)(void (*)(void))run_strips, METH_FASTCALL,
     "run_strips(steps, slots, shape): elementwise steps run a block at a time by NumPy's loops."},
    {"direct_elements", direct_elements, METH_NOARGS, "tiers.direct_elements in C."},
    {"view", (PyCFunction)(void (*)(void))view, METH_FASTCALL, "direct.view in C."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_VARARGS | METH_KEYWORDS,
     "Hand over the Python objects the recorder works on; once per process."},
    {"record_common", (PyCFunction)(void (*)(void))record_common, METH_FASTCALL,
     "record.record_common in C."},
    {"structure_id", structure_id, METH_O, "trace.structure_id in C."},
    {"fast_function", fast_function, METH_VARARGS,
     "fast_function(op, ufunc table or None; order; python_function): the function or method whose common case runs in C."},
    {"replay_key", (PyCFunction)(void (*)(void))replay_key, METH_FASTCALL, "trace.replay_key in C."},
    {"held_ancestors", (PyCFunction)(void (*)(void))held_ancestors, METH_FASTCALL, "trace.held_ancestors in C."},
    {"settle_sites", (PyCFunction)(void (*)(void))settle_sites, METH_FASTCALL,
     "tiers.settle_sites: a materialization's verdict, for the recent sites whose nodes it computed."},
    {"sites", site_states, METH_NOARGS, "tiers.sites: each site known, its state and counts."},
    {"site_repeats", site_repeats, METH_NOARGS, "tiers.site_repeats: the runs the recent sites stand for."},
    {"site_records", site_records_now, METH_NOARGS, "tiers.site_records: whether the calling place records the op."},
    {"cap_verdicts", cap_verdicts, METH_O, "tiers.cap_verdicts: the most a verdict may be from now on."},
    {"note_recorded", note_recorded, METH_O, "tiers.note_recorded: the node the last noted site recorded."},
    {"set_site_trials", (PyCFunction)(void (*)(void))set_site_trials, METH_FASTCALL,
     "tiers.set_site_trials(first, most): when sites try recording; 0 turns them off."},
    {"nothing_pending_swept", nothing_pending_swept, METH_NOARGS, "trace.nothing_pending_swept in C."},
    {"reads_nothing", reads_nothing, METH_O, "trace.reads_nothing in C."},
    {"replay_now", (PyCFunction)(void (*)(void))replay_now, METH_FASTCALL,
     "execute.materialize's common case in C: a node computed by the launch its structure kept."},
    {"pending_run", pending_run, METH_NOARGS, "trace.pending_run: this thread's pending nodes as a loop's run."},
    {"replay_group_now", (PyCFunction)(void (*)(void))replay_group_now, METH_FASTCALL,
     "execute.materialize's common case in C for several nodes: their group's kept launch."},
    {"launch_replay", (PyCFunction)(void (*)(void))launch_replay, METH_FASTCALL,
     "replay.KernelReplay.materialize's launch on one thread, in C."},
    {"set_profile_hook", set_profile_hook, METH_O,
     "set_profile_hook(hook or None): called with (0, node) for each op recorded, (1, None) for each run at once."},
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
    if (PyType_Ready(&method_type) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL)
        return NULL;
    /* An instancemethod binds like a Python function: usable as Node.__init__. */
    PyObject *function = PyCFunction_New(&node_init_definition, NULL);
    PyObject *method = function ? PyInstanceMethod_New(function) : NULL;
    Py_XDECREF(function);
    S.zero = PyLong_FromLong(0);
    S.empty = PyTuple_New(0);
    S.str_recording = PyUnicode_InternFromString("recording");
    S.str_refs = PyUnicode_InternFromString("refs");
    S.str_sweep_at = PyUnicode_InternFromString("sweep_at");
    S.str_sweep = PyUnicode_InternFromString("sweep");
    S.str_move_to_end = PyUnicode_InternFromString("move_to_end");
    S.str_deep = PyUnicode_InternFromString("deep");
    S.str_runs = PyUnicode_InternFromString("runs");
    S.str_launch_plan = PyUnicode_InternFromString("launch_plan");
    S.str_sweep_own = PyUnicode_InternFromString("sweep_own");
    S.str_table_limit = PyUnicode_InternFromString("STRUCTURE_TABLE_LIMIT");
    S.str_key_limit = PyUnicode_InternFromString("REPLAY_KEY_LIMIT");
    S.str_max_depth = PyUnicode_InternFromString("max_depth");
    S.str_reference = PyUnicode_InternFromString("reference");
    S.str_name = PyUnicode_InternFromString("name");
    S.str_direct = PyUnicode_InternFromString("direct");
    S.str_tiers = PyUnicode_InternFromString("tiers");
    S.str_backend = PyUnicode_InternFromString("backend");
    S.str_backends = PyUnicode_InternFromString("BACKENDS");
    S.str_memory = PyUnicode_InternFromString("memory");
    S.str_acquire = PyUnicode_InternFromString("acquire");
    S.str_release = PyUnicode_InternFromString("release");
    S.str_index = PyUnicode_InternFromString("index");
    S.str_shape = PyUnicode_InternFromString("shape");
    S.str_axes = PyUnicode_InternFromString("axes");
    S.str_axis = PyUnicode_InternFromString("axis");
    S.str_keepdims = PyUnicode_InternFromString("keepdims");
    S.str_dtype = PyUnicode_InternFromString("dtype");
    if (method == NULL || S.zero == NULL || S.empty == NULL || S.str_move_to_end == NULL || S.str_deep == NULL
        || S.str_runs == NULL || S.str_launch_plan == NULL || S.str_sweep_own == NULL || S.str_max_depth == NULL || S.str_index == NULL || S.str_shape == NULL || S.str_axes == NULL || S.str_axis == NULL || S.str_keepdims == NULL || S.str_dtype == NULL || S.str_reference == NULL || S.str_name == NULL || S.str_direct == NULL || S.str_tiers == NULL || S.str_backend == NULL || S.str_backends == NULL || S.str_memory == NULL || S.str_acquire == NULL || S.str_release == NULL
        || PyModule_AddObject(module, "node_init", method) < 0
        || PyModule_AddIntConstant(module, "INTERFACE_VERSION", INTERFACE_VERSION) < 0) {
        Py_XDECREF(method);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
