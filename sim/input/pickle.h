/* sim/input/pickle.h — a strict reader of the Python pickles that hold plain
 * data, for the files real runs leave behind (torch.cuda.memory's snapshot)
 * without a Python interpreter.
 *
 * Only the opcodes of protocols 2 to 5 that build dicts, lists, tuples,
 * str, int, float, bool and None are read:
 *   PROTO FRAME STOP MARK; EMPTY_DICT EMPTY_LIST EMPTY_TUPLE; SETITEM
 *   SETITEMS APPEND APPENDS TUPLE TUPLE1 TUPLE2 TUPLE3; MEMOIZE BINPUT
 *   LONG_BINPUT BINGET LONG_BINGET; BININT BININT1 BININT2 LONG1 (up to 64
 *   bits) BINFLOAT; NONE NEWTRUE NEWFALSE; SHORT_BINUNICODE BINUNICODE
 *   BINUNICODE8 (UTF-8).
 * Every other opcode (GLOBAL, REDUCE, BUILD: the ones that run code; bytes,
 * sets, text protocol 0) is an error naming its offset and name, as are a
 * truncated file, a stack or mark out of step, a memo index never stored,
 * and anything after STOP.  Nothing in the file is executed or trusted: a
 * count or a length is checked against the bytes left before it is used.
 *
 * Every value lives in the SimPickle that read it and is freed with it
 * (containers borrow their items), so a memo that makes a list hold itself
 * cannot leak or loop a free: readers walk the tree by the schema they
 * expect, one level at a time, never recursively.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SIM_PICKLE_NONE,
  SIM_PICKLE_BOOL,
  SIM_PICKLE_INT,
  SIM_PICKLE_FLOAT,
  SIM_PICKLE_STRING,
  SIM_PICKLE_LIST,
  SIM_PICKLE_TUPLE,
  SIM_PICKLE_DICT,
} SimPickleType;

typedef struct {
  SimPickleType type;
  gboolean boolean;
  gint64 integer;
  double number;
  const char *string; /* NUL-terminated UTF-8 (a NUL inside ends it early) */
  GPtrArray *items;   /* list, tuple: the items; dict: key, value, key, value... */
} SimPickleValue;

typedef struct SimPickle SimPickle;

/* Reads one pickle from `data`; `origin` (the file) prefixes errors,
 * which are SIM_ERROR_INPUT. */
SimPickle *sim_pickle_load_data(const char *data, gsize length, const char *origin, GError **error);
void sim_pickle_free(SimPickle *pickle);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimPickle, sim_pickle_free)

const SimPickleValue *sim_pickle_root(const SimPickle *pickle);

/* "dict", "list", "str", "int"...: Python's names, for messages. */
const char *sim_pickle_type_name(SimPickleType type);

/* The value of the str key `key` in `dict` (a SIM_PICKLE_DICT), or NULL. */
const SimPickleValue *sim_pickle_dict_get(const SimPickleValue *dict, const char *key);

G_END_DECLS
