/* sim/input/pickle.c — a strict reader of plain-data pickles (sim/input/pickle.h). */
#include "input/pickle.h"

#include "base/error.h"

#include <string.h>

struct SimPickle {
  GPtrArray *values; /* every value read, owned */
  SimPickleValue *root;
};

/* The reader's state: `stack` and `memo` borrow from `pickle->values`;
 * `marks` holds the stack depth at each MARK, as Python's metastack. */
typedef struct {
  const char *origin;
  const guchar *data;
  gsize length, pos, op_pos;
  guchar op;
  SimPickle *pickle;
  GPtrArray *stack, *memo;
  GArray *marks;
} Reader;

/* Python's name of every opcode (Lib/pickletools.py), for the message
 * that refuses one: "GLOBAL" says more than 0x63. */
static const char *
opcode_name(guchar op)
{
  switch (op) {
  case '(': return "MARK";
  case '.': return "STOP";
  case '0': return "POP";
  case '1': return "POP_MARK";
  case '2': return "DUP";
  case 'F': return "FLOAT";
  case 'I': return "INT";
  case 'J': return "BININT";
  case 'K': return "BININT1";
  case 'L': return "LONG";
  case 'M': return "BININT2";
  case 'N': return "NONE";
  case 'P': return "PERSID";
  case 'Q': return "BINPERSID";
  case 'R': return "REDUCE";
  case 'S': return "STRING";
  case 'T': return "BINSTRING";
  case 'U': return "SHORT_BINSTRING";
  case 'V': return "UNICODE";
  case 'X': return "BINUNICODE";
  case 'a': return "APPEND";
  case 'b': return "BUILD";
  case 'c': return "GLOBAL";
  case 'd': return "DICT";
  case '}': return "EMPTY_DICT";
  case 'e': return "APPENDS";
  case 'g': return "GET";
  case 'h': return "BINGET";
  case 'i': return "INST";
  case 'j': return "LONG_BINGET";
  case 'l': return "LIST";
  case ']': return "EMPTY_LIST";
  case 'o': return "OBJ";
  case 'p': return "PUT";
  case 'q': return "BINPUT";
  case 'r': return "LONG_BINPUT";
  case 's': return "SETITEM";
  case 't': return "TUPLE";
  case ')': return "EMPTY_TUPLE";
  case 'u': return "SETITEMS";
  case 'G': return "BINFLOAT";
  case 0x80: return "PROTO";
  case 0x81: return "NEWOBJ";
  case 0x82: return "EXT1";
  case 0x83: return "EXT2";
  case 0x84: return "EXT4";
  case 0x85: return "TUPLE1";
  case 0x86: return "TUPLE2";
  case 0x87: return "TUPLE3";
  case 0x88: return "NEWTRUE";
  case 0x89: return "NEWFALSE";
  case 0x8a: return "LONG1";
  case 0x8b: return "LONG4";
  case 'B': return "BINBYTES";
  case 'C': return "SHORT_BINBYTES";
  case 0x8c: return "SHORT_BINUNICODE";
  case 0x8d: return "BINUNICODE8";
  case 0x8e: return "BINBYTES8";
  case 0x8f: return "EMPTY_SET";
  case 0x90: return "ADDITEMS";
  case 0x91: return "FROZENSET";
  case 0x92: return "NEWOBJ_EX";
  case 0x93: return "STACK_GLOBAL";
  case 0x94: return "MEMOIZE";
  case 0x95: return "FRAME";
  case 0x96: return "BYTEARRAY8";
  case 0x97: return "NEXT_BUFFER";
  case 0x98: return "READONLY_BUFFER";
  default: return NULL;
  }
}

const char *
sim_pickle_type_name(SimPickleType type)
{
  static const char *const names[] = { "None", "bool", "int", "float", "str", "list", "tuple", "dict" };
  return type < G_N_ELEMENTS(names) ? names[type] : "?";
}

static void
value_free(gpointer data)
{
  SimPickleValue *v = data;
  if (v->items)
    g_ptr_array_unref(v->items);
  g_free((char *)v->string);
  g_free(v);
}

void
sim_pickle_free(SimPickle *pickle)
{
  if (pickle == NULL)
    return;
  g_ptr_array_unref(pickle->values);
  g_free(pickle);
}

const SimPickleValue *
sim_pickle_root(const SimPickle *pickle)
{
  return pickle->root;
}

const SimPickleValue *
sim_pickle_dict_get(const SimPickleValue *dict, const char *key)
{
  if (dict == NULL || dict->type != SIM_PICKLE_DICT)
    return NULL;
  for (guint i = 0; i + 1 < dict->items->len; i += 2) {
    const SimPickleValue *k = g_ptr_array_index(dict->items, i);
    if (k->type == SIM_PICKLE_STRING && strcmp(k->string, key) == 0)
      return g_ptr_array_index(dict->items, i + 1);
  }
  return NULL;
}

/* "FILE: pickle offset N (OPNAME): WHAT" */
G_GNUC_PRINTF(3, 4)
static gboolean
fail(Reader *r, GError **error, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  g_autofree char *what = g_strdup_vprintf(format, args);
  va_end(args);
  const char *name = opcode_name(r->op);
  g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: pickle offset %" G_GSIZE_FORMAT " (%s): %s", r->origin,
              r->op_pos, name ? name : "?", what);
  return FALSE;
}

static SimPickleValue *
value_new(Reader *r, SimPickleType type)
{
  SimPickleValue *v = g_new0(SimPickleValue, 1);
  v->type = type;
  if (type == SIM_PICKLE_LIST || type == SIM_PICKLE_TUPLE || type == SIM_PICKLE_DICT)
    v->items = g_ptr_array_new();
  g_ptr_array_add(r->pickle->values, v);
  return v;
}

/* `n` bytes of argument, or a truncation error. */
static const guchar *
take(Reader *r, gsize n, GError **error)
{
  if (n > r->length - r->pos) {
    fail(r, error, "truncated: %" G_GSIZE_FORMAT " bytes of argument expected, %" G_GSIZE_FORMAT " left", n,
         r->length - r->pos);
    return NULL;
  }
  const guchar *p = r->data + r->pos;
  r->pos += n;
  return p;
}

static guint64
little_endian(const guchar *p, guint n)
{
  guint64 v = 0;
  for (guint i = 0; i < n; i++)
    v |= (guint64)p[i] << (8 * i);
  return v;
}

static void
push(Reader *r, SimPickleValue *v)
{
  g_ptr_array_add(r->stack, v);
}

/* The stack depth below which the innermost MARK hides values. */
static guint
mark_floor(const Reader *r)
{
  return r->marks->len ? g_array_index(r->marks, guint, r->marks->len - 1) : 0;
}

/* The stack's top; none left (or only what a MARK keeps) is an error. */
static SimPickleValue *
top(Reader *r, GError **error)
{
  if (r->stack->len <= mark_floor(r)) {
    fail(r, error, "the stack is empty (expected a value)");
    return NULL;
  }
  return g_ptr_array_index(r->stack, r->stack->len - 1);
}

/* The same, popped. */
static SimPickleValue *
pop(Reader *r, GError **error)
{
  return top(r, error) ? g_ptr_array_steal_index(r->stack, r->stack->len - 1) : NULL;
}

/* The position of the last MARK, popped; the values above it stay for the caller. */
static gboolean
pop_mark(Reader *r, guint *at, GError **error)
{
  if (r->marks->len == 0)
    return fail(r, error, "no MARK before it");
  *at = g_array_index(r->marks, guint, r->marks->len - 1);
  g_array_set_size(r->marks, r->marks->len - 1);
  return TRUE;
}

static gboolean
expect_container(Reader *r, const SimPickleValue *v, SimPickleType type, GError **error)
{
  if (v->type != type)
    return fail(r, error, "expected a %s to add to, got a %s", sim_pickle_type_name(type),
                sim_pickle_type_name(v->type));
  return TRUE;
}

/* Moves stack[from..] into `items` (key, value pairs for a dict). */
static gboolean
add_items(Reader *r, SimPickleValue *container, guint from, GError **error)
{
  guint n = r->stack->len - from;
  if (container->type == SIM_PICKLE_DICT && n % 2)
    return fail(r, error, "%u values after the MARK (expected key, value pairs)", n);
  for (guint i = from; i < r->stack->len; i++)
    g_ptr_array_add(container->items, g_ptr_array_index(r->stack, i));
  g_ptr_array_set_size(r->stack, from);
  return TRUE;
}

static gboolean
build_tuple(Reader *r, guint from, GError **error)
{
  (void)error;
  SimPickleValue *t = value_new(r, SIM_PICKLE_TUPLE);
  add_items(r, t, from, NULL);
  push(r, t);
  return TRUE;
}

static gboolean
string(Reader *r, gsize n, GError **error)
{
  const guchar *p = take(r, n, error);
  if (p == NULL)
    return FALSE;
  if (!g_utf8_validate_len((const char *)p, n, NULL))
    return fail(r, error, "a str that is not UTF-8");
  SimPickleValue *v = value_new(r, SIM_PICKLE_STRING);
  v->string = g_strndup((const char *)p, n);
  push(r, v);
  return TRUE;
}

static gboolean
memo_put(Reader *r, guint64 index, GError **error)
{
  SimPickleValue *v = top(r, error);
  if (v == NULL)
    return FALSE;
  /* A memo index is at most one past the values read so far, or a
   * 4-byte index would size an array of 4 G pointers. */
  if (index > r->pickle->values->len)
    return fail(r, error, "memo index %" G_GUINT64_FORMAT " beyond the %u values read", index,
                r->pickle->values->len);
  if (index >= r->memo->len)
    g_ptr_array_set_size(r->memo, (guint)index + 1);
  g_ptr_array_index(r->memo, index) = v;
  return TRUE;
}

static gboolean
memo_get(Reader *r, guint64 index, GError **error)
{
  if (index >= r->memo->len || g_ptr_array_index(r->memo, index) == NULL)
    return fail(r, error, "memo index %" G_GUINT64_FORMAT " was never stored", index);
  push(r, g_ptr_array_index(r->memo, index));
  return TRUE;
}

static gboolean
integer(Reader *r, gint64 value)
{
  SimPickleValue *v = value_new(r, SIM_PICKLE_INT);
  v->integer = value;
  push(r, v);
  return TRUE;
}

/* LONG1: little-endian two's complement of n bytes; wider than 64 bits is refused. */
static gboolean
long1(Reader *r, GError **error)
{
  const guchar *n = take(r, 1, error);
  if (n == NULL)
    return FALSE;
  if (*n > 8)
    return fail(r, error, "an int of %u bytes (expected at most 8)", *n);
  const guchar *p = take(r, *n, error);
  if (p == NULL)
    return FALSE;
  guint64 bits = little_endian(p, *n);
  if (*n > 0 && *n < 8 && (p[*n - 1] & 0x80))
    bits |= ~(guint64)0 << (8 * *n); /* sign-extend */
  return integer(r, (gint64)bits);
}

static gboolean
step(Reader *r, gboolean *done, GError **error)
{
  r->op_pos = r->pos;
  r->op = r->data[r->pos++];
  const guchar *p;
  SimPickleValue *v, *k, *c;
  guint at = 0;
  switch (r->op) {
  case 0x80: /* PROTO */
    if ((p = take(r, 1, error)) == NULL)
      return FALSE;
    if (*p < 2 || *p > 5)
      return fail(r, error, "protocol %u (expected 2 to 5)", *p);
    return TRUE;
  case 0x95: /* FRAME: a length hint for buffered readers; the whole file is here */
    if ((p = take(r, 8, error)) == NULL)
      return FALSE;
    if (little_endian(p, 8) > r->length - r->pos)
      return fail(r, error, "truncated: a frame of %" G_GUINT64_FORMAT " bytes, %" G_GSIZE_FORMAT " left",
                  little_endian(p, 8), r->length - r->pos);
    return TRUE;
  case '.': /* STOP */
    if (r->marks->len)
      return fail(r, error, "a MARK was left open");
    if (r->stack->len != 1)
      return fail(r, error, "%u values on the stack (expected 1)", r->stack->len);
    if (r->pos != r->length)
      return fail(r, error, "%" G_GSIZE_FORMAT " bytes after the end of the pickle", r->length - r->pos);
    r->pickle->root = g_ptr_array_index(r->stack, 0);
    *done = TRUE;
    return TRUE;
  case '(': /* MARK */
    g_array_append_val(r->marks, r->stack->len);
    return TRUE;
  case '}':
    push(r, value_new(r, SIM_PICKLE_DICT));
    return TRUE;
  case ']':
    push(r, value_new(r, SIM_PICKLE_LIST));
    return TRUE;
  case ')':
    push(r, value_new(r, SIM_PICKLE_TUPLE));
    return TRUE;
  case 'N':
    push(r, value_new(r, SIM_PICKLE_NONE));
    return TRUE;
  case 0x88: /* NEWTRUE */
  case 0x89: /* NEWFALSE */
    v = value_new(r, SIM_PICKLE_BOOL);
    v->boolean = r->op == 0x88;
    push(r, v);
    return TRUE;
  case 'K': /* BININT1 */
    return (p = take(r, 1, error)) && integer(r, p[0]);
  case 'M': /* BININT2 */
    return (p = take(r, 2, error)) && integer(r, (gint64)little_endian(p, 2));
  case 'J': /* BININT: signed */
    return (p = take(r, 4, error)) && integer(r, (gint32)(guint32)little_endian(p, 4));
  case 0x8a: /* LONG1 */
    return long1(r, error);
  case 'G': { /* BINFLOAT: big-endian IEEE 754 double */
    if ((p = take(r, 8, error)) == NULL)
      return FALSE;
    guint64 bits = 0;
    for (guint i = 0; i < 8; i++)
      bits = bits << 8 | p[i];
    v = value_new(r, SIM_PICKLE_FLOAT);
    memcpy(&v->number, &bits, sizeof bits);
    push(r, v);
    return TRUE;
  }
  case 0x8c: /* SHORT_BINUNICODE */
    return (p = take(r, 1, error)) && string(r, p[0], error);
  case 'X': /* BINUNICODE */
    return (p = take(r, 4, error)) && string(r, little_endian(p, 4), error);
  case 0x8d: /* BINUNICODE8 */
    return (p = take(r, 8, error)) && string(r, little_endian(p, 8), error);
  case 0x94: /* MEMOIZE */
    return memo_put(r, r->memo->len, error);
  case 'q': /* BINPUT */
    return (p = take(r, 1, error)) && memo_put(r, p[0], error);
  case 'r': /* LONG_BINPUT */
    return (p = take(r, 4, error)) && memo_put(r, little_endian(p, 4), error);
  case 'h': /* BINGET */
    return (p = take(r, 1, error)) && memo_get(r, p[0], error);
  case 'j': /* LONG_BINGET */
    return (p = take(r, 4, error)) && memo_get(r, little_endian(p, 4), error);
  case 'a': /* APPEND */
    if ((v = pop(r, error)) == NULL || (c = top(r, error)) == NULL || !expect_container(r, c, SIM_PICKLE_LIST, error))
      return FALSE;
    g_ptr_array_add(c->items, v);
    return TRUE;
  case 's': /* SETITEM */
    if ((v = pop(r, error)) == NULL || (k = pop(r, error)) == NULL || (c = top(r, error)) == NULL
        || !expect_container(r, c, SIM_PICKLE_DICT, error))
      return FALSE;
    g_ptr_array_add(c->items, k);
    g_ptr_array_add(c->items, v);
    return TRUE;
  case 'e': /* APPENDS */
  case 'u': /* SETITEMS */
    if (!pop_mark(r, &at, error))
      return FALSE;
    if (at == 0 || at <= mark_floor(r))
      return fail(r, error, "nothing below the MARK to add to");
    c = g_ptr_array_index(r->stack, at - 1);
    return expect_container(r, c, r->op == 'e' ? SIM_PICKLE_LIST : SIM_PICKLE_DICT, error)
           && add_items(r, c, at, error);
  case 't': /* TUPLE */
    return pop_mark(r, &at, error) && build_tuple(r, at, error);
  case 0x85: /* TUPLE1 */
  case 0x86: /* TUPLE2 */
  case 0x87: { /* TUPLE3 */
    guint n = r->op - 0x84;
    guint floor = mark_floor(r);
    if (r->stack->len < floor + n)
      return fail(r, error, "%u values on the stack (expected %u)", r->stack->len - floor, n);
    return build_tuple(r, r->stack->len - n, error);
  }
  default: {
    const char *name = opcode_name(r->op);
    if (name)
      return fail(r, error, "opcode 0x%02x %s is not read here (expected a pickle of plain data: dict, list, tuple, "
                            "str, int, float, bool, None)", r->op, name);
    return fail(r, error, "byte 0x%02x is not a pickle opcode (expected a pickle of plain data)", r->op);
  }
  }
}

SimPickle *
sim_pickle_load_data(const char *data, gsize length, const char *origin, GError **error)
{
  g_autoptr(GPtrArray) stack = g_ptr_array_new();
  g_autoptr(GPtrArray) memo = g_ptr_array_new();
  g_autoptr(GArray) marks = g_array_new(FALSE, FALSE, sizeof(guint));
  SimPickle *pickle = g_new0(SimPickle, 1);
  pickle->values = g_ptr_array_new_with_free_func(value_free);
  Reader r = { .origin = origin, .data = (const guchar *)data, .length = length, .pickle = pickle,
               .stack = stack, .memo = memo, .marks = marks };
  if (length == 0 || (guchar)data[0] != 0x80) {
    g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT,
                "%s: not a pickle of protocol 2 or later (expected it to start with PROTO, byte 0x80)", origin);
    sim_pickle_free(pickle);
    return NULL;
  }
  gboolean done = FALSE;
  while (!done) {
    if (r.pos == r.length) {
      g_set_error(error, SIM_ERROR, SIM_ERROR_INPUT, "%s: pickle offset %" G_GSIZE_FORMAT ": truncated: the file ends before STOP",
                  origin, r.pos);
      sim_pickle_free(pickle);
      return NULL;
    }
    if (!step(&r, &done, error)) {
      sim_pickle_free(pickle);
      return NULL;
    }
  }
  return pickle;
}
