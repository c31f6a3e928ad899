/* The validators and the reference stages called directly, with argument
 * structs no case directory can produce (the case binder always builds
 * well-formed ones).  Each stage has a small valid baseline built from
 * SPEC.md's layouts (section 3); each table row breaks it in one way and
 * expects the status SPEC.md section 8 gives, a message naming the tensor
 * or field (and the index where the rule has one), and not one byte
 * written by the reference stage.  The int64 extremes of positions run
 * through every stage; the build's UBSan (-fno-sanitize-recover) turns any
 * overflow in validation or in a stage into a failed test. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/layout.h"
#include "kvcmp/reference.h"
#include "kvcmp/validate.h"

#define CANARY 0xC3
#define PAD 64      /* bytes between pages: padding no stage may touch */

/* ---- edits: one field of a fixture set to a bad (or odd but valid) value */

typedef enum { EDIT_END = 0, EDIT_INT, EDIT_ADD, EDIT_F32, EDIT_NULL, EDIT_SHIFT, EDIT_INTO, EDIT_MOVE, EDIT_PLACE } edit_op;

typedef struct {
    edit_op op;
    size_t at;      /* offset of the edited field in the fixture */
    size_t size;    /* EDIT_INT, EDIT_ADD: 4 or 8 bytes; EDIT_MOVE: bytes copied */
    int64_t value;  /* EDIT_INT: the value; EDIT_ADD: the change; EDIT_SHIFT, EDIT_INTO, EDIT_MOVE: bytes */
    float real;     /* EDIT_F32 */
    size_t from;    /* EDIT_INTO, EDIT_MOVE: a pointer field; EDIT_PLACE: a member */
} edit;

/* Each table defines FIXTURE to its fixture type first. */
#define SET(field, v) {EDIT_INT, offsetof(FIXTURE, field), sizeof(((FIXTURE *)0)->field), (v), 0.0f, 0}
#define ADD(field, v) {EDIT_ADD, offsetof(FIXTURE, field), sizeof(((FIXTURE *)0)->field), (v), 0.0f, 0}
#define SETF(field, v) {EDIT_F32, offsetof(FIXTURE, field), 4, 0, (v), 0}
#define NUL(field) {EDIT_NULL, offsetof(FIXTURE, field), 0, 0, 0.0f, 0}
/* Pointer field moved by `bytes`. */
#define SHIFT(field, bytes) {EDIT_SHIFT, offsetof(FIXTURE, field), 0, (bytes), 0.0f, 0}
/* Pointer field := pointer field `base` + bytes (an input moved onto an output). */
#define INTO(field, base, bytes) {EDIT_INTO, offsetof(FIXTURE, field), 0, (bytes), 0.0f, offsetof(FIXTURE, base)}
/* INTO with the tensor's first `bytes` bytes copied along: an index tensor
 * moved onto an output still holds valid indices, so only the overlap is wrong. */
#define MOVE(field, base, offset, bytes) {EDIT_MOVE, offsetof(FIXTURE, field), (bytes), (offset), 0.0f, offsetof(FIXTURE, base)}
/* Pointer field := the fixture's member `member` (the spare buffer after every output). */
#define PLACE(field, member) {EDIT_PLACE, offsetof(FIXTURE, field), 0, 0, 0.0f, offsetof(FIXTURE, member)}

#define MAX_EDITS 6

typedef struct {
    const char *what;
    edit edits[MAX_EDITS];
    int code;               /* SPEC.md section 8 */
    const char *names[2];   /* what the message must name */
} mutation;

static void apply_edit(uint8_t *fixture, const edit *e) {
    void **pointer = (void **)(fixture + e->at);
    switch (e->op) {
    case EDIT_END: break;
    case EDIT_INT:
        if (e->size == 8) { int64_t v = e->value; memcpy(fixture + e->at, &v, 8); }
        else { int32_t v = (int32_t)e->value; memcpy(fixture + e->at, &v, 4); }
        break;
    case EDIT_ADD:
        if (e->size == 8) { int64_t v; memcpy(&v, fixture + e->at, 8); v += e->value; memcpy(fixture + e->at, &v, 8); }
        else { int32_t v; memcpy(&v, fixture + e->at, 4); v += (int32_t)e->value; memcpy(fixture + e->at, &v, 4); }
        break;
    case EDIT_F32: memcpy(fixture + e->at, &e->real, 4); break;
    case EDIT_NULL: *pointer = NULL; break;
    case EDIT_SHIFT: *pointer = (uint8_t *)*pointer + e->value; break;
    case EDIT_INTO: *pointer = *(uint8_t **)(fixture + e->from) + e->value; break;
    case EDIT_MOVE: {
        uint8_t *target = *(uint8_t **)(fixture + e->from) + e->value;
        memcpy(target, *pointer, e->size);
        *pointer = target;
        break;
    }
    case EDIT_PLACE: *pointer = fixture + e->from; break;
    }
}

/* `name` occurs in `message` as a whole word: "kv" is not found in
 * "kv_cache", "slot_mapping[2]" not in "kv_slot_mapping[2]". */
static int is_word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static int names(const char *message, const char *name) {
    size_t length = strlen(name);
    for (const char *at = strstr(message, name); at; at = strstr(at + 1, name)) {
        int starts = at == message || !is_word_char(at[-1]);
        /* A name ending in ']' needs no boundary after it. */
        int ends = !is_word_char(name[length - 1]) || !is_word_char(at[length]);
        if (starts && ends) return 1;
    }
    return 0;
}

/* ---- stages ------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t size;
    size_t positions_at;   /* offset of the positions array in the fixture */
    void (*init)(void *fixture);
    int (*validate)(const void *fixture, kvc_error *err);
    int (*reference)(const void *fixture, kvc_error *err);
} stage;

static void *new_fixture(const stage *s) {
    void *fixture = aligned_alloc(64, (s->size + 63) / 64 * 64);
    cr_assert_not_null(fixture);
    memset(fixture, 0, s->size);
    s->init(fixture);
    return fixture;
}

/* Deterministic finite values of modest size. */
static float pattern(size_t i, int salt) {
    return (float)((int)((i * 37u + (size_t)salt * 11u) % 97u) - 48) / 16.0f;
}
static void fill_floats(void *out, size_t count, int salt) {
    for (size_t i = 0; i < count; i++) {
        float v = pattern(i, salt);
        memcpy((uint8_t *)out + 4 * i, &v, 4);
    }
}
/* bf16 bits of a value in [0.5, 2). */
static void fill_bf16(uint16_t *out, size_t count, int salt) {
    for (size_t i = 0; i < count; i++) out[i] = (uint16_t)(0x3F00 + (i * 7u + (size_t)salt) % 0x100u);
}
/* cos_sin rows: 32 cos then 32 sin. */
static void fill_cos_sin(float *cos_sin, int64_t rows) {
    for (int64_t r = 0; r < rows; r++)
        for (int i = 0; i < 32; i++) {
            cos_sin[r * 64 + i] = 0.6f;
            cos_sin[r * 64 + 32 + i] = 0.8f;
        }
}

static int all_canary(const uint8_t *bytes, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (bytes[i] != CANARY) return 0;
    return 1;
}

/* The gap after every page of a cache still holds the canary. */
static void expect_padding_intact(const kvc_paged_cache *c, const char *what) {
    for (int64_t page = 0; page < c->num_pages; page++)
        cr_expect(all_canary((const uint8_t *)c->data + page * c->page_stride + c->page_bytes, (size_t)(c->page_stride - c->page_bytes)),
                  "%s: padding after page %lld was written", what, (long long)page);
}

/* ---- v4.save_partial_states: R = 4, D = 128, so W = coff * D = 256 ------- */

enum {
    SAVE_T = 4, SAVE_W = 2 * 128, SAVE_ROW = 2 * SAVE_W * 4, SAVE_ROWS = 2, SAVE_PAGES = 2,
    SAVE_PAGE = SAVE_ROWS * SAVE_ROW, SAVE_STRIDE = SAVE_PAGE + PAD,
};

typedef struct {
    float kv[SAVE_T * SAVE_W], score[SAVE_T * SAVE_W], ape[4 * SAVE_W];
    int64_t positions[SAVE_T], slot_mapping[SAVE_T];
    _Alignas(64) uint8_t state[SAVE_PAGES * SAVE_STRIDE];   /* output */
    _Alignas(64) uint8_t spare[4 * SAVE_W * 4];             /* after the output */
    kvc_v4_save_args args;
} save_fixture;

/* Tokens 0, 1, 3 write state slots 1, 2, 0; token 2 is padding. */
static void save_init(void *p) {
    save_fixture *f = p;
    fill_floats(f->kv, SAVE_T * SAVE_W, 1);
    fill_floats(f->score, SAVE_T * SAVE_W, 2);
    fill_floats(f->ape, 4 * SAVE_W, 3);
    const int64_t positions[SAVE_T] = {5, 6, 7, 8}, slots[SAVE_T] = {1, 2, -1, 0};
    memcpy(f->positions, positions, sizeof positions);
    memcpy(f->slot_mapping, slots, sizeof slots);
    memset(f->state, CANARY, sizeof f->state);
    f->args = (kvc_v4_save_args){
        .num_tokens = SAVE_T, .compress_ratio = 4, .head_dim = 128, .kv = f->kv, .score = f->score, .ape = f->ape,
        .positions = f->positions, .slot_mapping = f->slot_mapping,
        .state_cache = {f->state, SAVE_PAGES, SAVE_ROWS, SAVE_PAGE, SAVE_STRIDE},
    };
}
static int save_validate(const void *f, kvc_error *err) { return kvc_validate_v4_save(&((const save_fixture *)f)->args, err); }
static int save_reference(const void *f, kvc_error *err) { return ref_v4_save_partial_states(&((const save_fixture *)f)->args, err); }
static const stage save_stage = {"v4.save_partial_states", sizeof(save_fixture), offsetof(save_fixture, positions),
                                 save_init, save_validate, save_reference};

/* ---- v4.compress: R = 4, D = 128 (fp8_indexer), BS = 4 ------------------ */

enum {
    CMP_T = 6, CMP_D = 128, CMP_W = 2 * CMP_D, CMP_STATE_ROW = 2 * CMP_W * 4, CMP_BS = 4, CMP_STATE_PAGES = 3,
    CMP_STATE_PAGE = CMP_BS * CMP_STATE_ROW, CMP_STATE_STRIDE = CMP_STATE_PAGE + PAD,
    CMP_KV_ROW = KVC_FP8_INDEXER_TOKEN_BYTES + KVC_FP8_INDEXER_SCALE_BYTES, CMP_KV_ROWS = 2, CMP_KV_PAGES = 2,
    CMP_KV_PAGE = CMP_KV_ROWS * CMP_KV_ROW, CMP_KV_STRIDE = CMP_KV_PAGE + PAD,
    CMP_COS_ROWS = 8, CMP_REQUESTS = 2, CMP_MAX_BLOCKS = 2,
};

typedef struct {
    _Alignas(64) uint8_t state[CMP_STATE_PAGES * CMP_STATE_STRIDE];   /* input */
    int32_t block_table[CMP_REQUESTS * CMP_MAX_BLOCKS], token_to_req[CMP_T];
    int64_t positions[CMP_T], slot_mapping[CMP_T], kv_slot_mapping[CMP_T];
    float norm_weight[CMP_D], cos_sin[CMP_COS_ROWS * 64];
    _Alignas(64) uint8_t kv_cache[CMP_KV_PAGES * CMP_KV_STRIDE];      /* output */
    _Alignas(64) uint8_t spare[CMP_STATE_PAGES * CMP_STATE_STRIDE];   /* after the output */
    kvc_v4_compress_args args;
} compress_fixture;

/* Request 0 owns state blocks (1, 0), request 1 block 2 (its second
 * column -1: never read).  Closing tokens 0 (p 3), 2 (p 7) and 3 (p 3,
 * request 1) write kv rows 0, 3, 1; token 1 (p 6) is valid but does not
 * close; token 4 is padding; token 5 has a state slot and no kv slot. */
static void compress_init(void *p) {
    compress_fixture *f = p;
    fill_floats(f->state, sizeof f->state / 4, 4);
    const int32_t table[] = {1, 0, 2, -1}, requests[CMP_T] = {0, 0, 0, 1, 0, 1};
    const int64_t positions[CMP_T] = {3, 6, 7, 3, 99, 11}, slots[CMP_T] = {7, 2, 3, 11, -1, 0},
                  kv_slots[CMP_T] = {0, 2, 3, 1, -1, -1};
    memcpy(f->block_table, table, sizeof table);
    memcpy(f->token_to_req, requests, sizeof requests);
    memcpy(f->positions, positions, sizeof positions);
    memcpy(f->slot_mapping, slots, sizeof slots);
    memcpy(f->kv_slot_mapping, kv_slots, sizeof kv_slots);
    for (int d = 0; d < CMP_D; d++) f->norm_weight[d] = 1.0f + (float)d / 256.0f;
    fill_cos_sin(f->cos_sin, CMP_COS_ROWS);
    memset(f->kv_cache, CANARY, sizeof f->kv_cache);
    f->args = (kvc_v4_compress_args){
        .num_tokens = CMP_T, .compress_ratio = 4, .head_dim = CMP_D, .eps = 1e-6f,
        .state_cache = {f->state, CMP_STATE_PAGES, CMP_BS, CMP_STATE_PAGE, CMP_STATE_STRIDE},
        .block_table = f->block_table, .num_requests = CMP_REQUESTS, .max_blocks = CMP_MAX_BLOCKS,
        .token_to_req = f->token_to_req, .positions = f->positions, .slot_mapping = f->slot_mapping,
        .kv_slot_mapping = f->kv_slot_mapping, .norm_weight = f->norm_weight, .cos_sin = f->cos_sin,
        .cos_sin_rows = CMP_COS_ROWS, .kv_cache = {f->kv_cache, CMP_KV_PAGES, CMP_KV_ROWS, CMP_KV_PAGE, CMP_KV_STRIDE},
    };
}
static int compress_validate(const void *f, kvc_error *err) { return kvc_validate_v4_compress(&((const compress_fixture *)f)->args, err); }
static int compress_reference(const void *f, kvc_error *err) { return ref_v4_compress(&((const compress_fixture *)f)->args, err); }
static const stage compress_stage = {"v4.compress", sizeof(compress_fixture), offsetof(compress_fixture, positions),
                                     compress_init, compress_validate, compress_reference};

/* ---- v41.save_compress_norm: R = 2, ring CAP = 8 ------------------------ */

enum {
    NORM_T = 8, NORM_CAP = 8, NORM_RING_ROW = 2 * KVC_V41_HEAD_DIM * 4, NORM_PAGE = NORM_CAP * NORM_RING_ROW,
    NORM_STRIDE = NORM_PAGE + PAD, NORM_BLOCKS = 3, NORM_REQUESTS = 3,
};

typedef struct {
    float kv_score[NORM_T * 2 * KVC_V41_HEAD_DIM];
    int64_t positions[NORM_T], slot_mapping[NORM_T];
    int32_t query_start_loc[NORM_REQUESTS + 1], token_to_req[NORM_T];
    uint16_t norm_weight[KVC_V41_HEAD_DIM];
    _Alignas(64) uint16_t latent[NORM_T * KVC_V41_HEAD_DIM];       /* output */
    _Alignas(64) uint8_t state[NORM_BLOCKS * NORM_STRIDE];         /* ring: read, then written */
    _Alignas(64) float spare[NORM_T * 2 * KVC_V41_HEAD_DIM];       /* after the outputs */
    kvc_v41_norm_args args;
} norm_fixture;

/* Request 0: tokens 0-2 at positions 4-6 in ring block 1; request 1:
 * tokens 3-5 at positions 1-3 in block 2, token 4 a padding row inside the
 * chunk; request 2: token 6 alone at position 8 in block 0; token 7 is
 * padding after query_start_loc[3], its metadata arbitrary.  Closing:
 * tokens 1, 3 (first of its chunk: ring row 0 of block 2) and 5. */
static void norm_init(void *p) {
    norm_fixture *f = p;
    fill_floats(f->kv_score, NORM_T * 2 * KVC_V41_HEAD_DIM, 5);
    const int64_t positions[NORM_T] = {4, 5, 6, 1, 2, 3, 8, 12345}, slots[NORM_T] = {12, 13, 14, 17, -1, 19, 0, -1};
    const int32_t starts[NORM_REQUESTS + 1] = {0, 3, 6, 7}, requests[NORM_T] = {0, 0, 0, 1, 1, 1, 2, 77};
    memcpy(f->positions, positions, sizeof positions);
    memcpy(f->slot_mapping, slots, sizeof slots);
    memcpy(f->query_start_loc, starts, sizeof starts);
    memcpy(f->token_to_req, requests, sizeof requests);
    fill_bf16(f->norm_weight, KVC_V41_HEAD_DIM, 6);
    memset(f->latent, CANARY, sizeof f->latent);
    memset(f->state, CANARY, sizeof f->state);
    f->args = (kvc_v41_norm_args){
        .num_tokens = NORM_T, .compress_ratio = 2, .eps = 1e-6f, .kv_score = f->kv_score, .positions = f->positions,
        .slot_mapping = f->slot_mapping, .norm_weight = f->norm_weight, .latent = f->latent,
        .state_cache = {f->state, NORM_BLOCKS, NORM_CAP, NORM_PAGE, NORM_STRIDE},
        .query_start_loc = f->query_start_loc, .num_requests = NORM_REQUESTS, .token_to_req = f->token_to_req,
    };
}
static int norm_validate(const void *f, kvc_error *err) { return kvc_validate_v41_norm(&((const norm_fixture *)f)->args, err); }
static int norm_reference(const void *f, kvc_error *err) { return ref_v41_save_compress_norm(&((const norm_fixture *)f)->args, err); }
static const stage norm_stage = {"v41.save_compress_norm", sizeof(norm_fixture), offsetof(norm_fixture, positions),
                                 norm_init, norm_validate, norm_reference};

/* ---- v41.rope_quant_insert / rope_plain_insert: R = 2 ------------------- */

enum { INS_T = 4, INS_ROWS = 2, INS_PAGES = 2, INS_WIDEST_ROW = 2 * KVC_V41_HEAD_DIM, INS_COS_ROWS = 4 };

typedef struct {
    uint16_t latent[INS_T * KVC_V41_HEAD_DIM];
    int64_t positions[INS_T], slot_mapping[INS_T];
    float cos_sin[INS_COS_ROWS * 64];
    /* Sized for the widest row (bf16), with slack after the last page for
     * the rows that shift the data pointer of a valid cache. */
    _Alignas(64) uint8_t kv_cache[INS_PAGES * (INS_ROWS * INS_WIDEST_ROW + PAD) + PAD];   /* output */
    _Alignas(64) uint8_t spare[INS_T * KVC_V41_HEAD_DIM * 2];                             /* after the output */
    kvc_v41_insert_args args;
} insert_fixture;

/* Tokens 0 (p 1) and 2 (p 3) close and write rows 0 and 2; token 1 (p 2)
 * is valid but does not close (R = 2); token 3 is padding. */
static void insert_init(insert_fixture *f, kvc_cache_dtype dtype, float fp8_scale) {
    fill_bf16(f->latent, INS_T * KVC_V41_HEAD_DIM, 7);
    const int64_t positions[INS_T] = {1, 2, 3, 5}, slots[INS_T] = {0, 3, 2, -1};
    memcpy(f->positions, positions, sizeof positions);
    memcpy(f->slot_mapping, slots, sizeof slots);
    fill_cos_sin(f->cos_sin, INS_COS_ROWS);
    memset(f->kv_cache, CANARY, sizeof f->kv_cache);
    int64_t page = INS_ROWS * kvc_cache_row_bytes(dtype);
    f->args = (kvc_v41_insert_args){
        .num_tokens = INS_T, .compress_ratio = 2, .cache_dtype = dtype, .latent = f->latent, .positions = f->positions,
        .slot_mapping = f->slot_mapping, .cos_sin = f->cos_sin, .cos_sin_rows = INS_COS_ROWS,
        .kv_cache = {f->kv_cache, INS_PAGES, INS_ROWS, page, page + PAD}, .fp8_scale = fp8_scale,
    };
}
/* fp8_scale is read only for fp8_e4m3: the others carry a NaN. */
static void quant_init(void *f) { insert_init(f, KVC_CACHE_FP8_DS_MLA, NAN); }
static void bf16_init(void *f) { insert_init(f, KVC_CACHE_BF16, NAN); }
static void fp8_init(void *f) { insert_init(f, KVC_CACHE_FP8_E4M3, 0.5f); }
static int quant_validate(const void *f, kvc_error *err) { return kvc_validate_v41_insert(&((const insert_fixture *)f)->args, 1, err); }
static int plain_validate(const void *f, kvc_error *err) { return kvc_validate_v41_insert(&((const insert_fixture *)f)->args, 0, err); }
static int quant_reference(const void *f, kvc_error *err) { return ref_v41_rope_quant_insert(&((const insert_fixture *)f)->args, err); }
static int plain_reference(const void *f, kvc_error *err) { return ref_v41_rope_plain_insert(&((const insert_fixture *)f)->args, err); }
static const stage quant_stage = {"v41.rope_quant_insert", sizeof(insert_fixture), offsetof(insert_fixture, positions),
                                  quant_init, quant_validate, quant_reference};
static const stage bf16_stage = {"v41.rope_plain_insert bf16", sizeof(insert_fixture), offsetof(insert_fixture, positions),
                                 bf16_init, plain_validate, plain_reference};
static const stage fp8_stage = {"v41.rope_plain_insert fp8_e4m3", sizeof(insert_fixture), offsetof(insert_fixture, positions),
                                fp8_init, plain_validate, plain_reference};

/* ---- the runner --------------------------------------------------------- */

/* The baseline with the row's edits: the validator's status and message,
 * the same status without an error struct, and the reference stage's
 * verdict; a refused row must leave every byte of the fixture (inputs,
 * outputs, padding) as it was. */
static void run_row(const stage *s, const mutation *row) {
    uint8_t *fixture = new_fixture(s);
    for (int i = 0; i < MAX_EDITS; i++) apply_edit(fixture, &row->edits[i]);
    kvc_error err = {.code = -1};
    int rc = s->validate(fixture, &err);
    cr_expect_eq(rc, row->code, "%s, %s: expected %s, got %s: %s", s->name, row->what, kvc_status_name(row->code),
                 kvc_status_name(rc), rc ? err.message : "");
    cr_expect_eq(err.code, rc, "%s, %s: err.code %d, returned %d", s->name, row->what, err.code, rc);
    cr_expect_eq(s->validate(fixture, NULL), rc, "%s, %s: another status without an error struct", s->name, row->what);
    for (int i = 0; i < 2 && rc && row->names[i]; i++)
        cr_expect(names(err.message, row->names[i]), "%s, %s: message '%s' does not name '%s'", s->name, row->what,
                  err.message, row->names[i]);
    if (rc == KVC_OK && rc == row->code) {
        cr_expect_eq(err.message[0], 0, "%s, %s: a message on success: %s", s->name, row->what, err.message);
        kvc_error ref_err;
        int ref_rc = s->reference(fixture, &ref_err);
        cr_expect_eq(ref_rc, KVC_OK, "%s, %s: the reference refuses what the validator accepts: %s", s->name, row->what,
                     ref_err.message);
    } else if (rc == row->code) {
        /* Only a refusal the validator got right reaches the stage: a wrong
         * acceptance would let it write out of bounds. */
        uint8_t *before = malloc(s->size);
        cr_assert_not_null(before);
        memcpy(before, fixture, s->size);
        kvc_error ref_err;
        int ref_rc = s->reference(fixture, &ref_err);
        cr_expect_eq(ref_rc, rc, "%s, %s: the reference says %s", s->name, row->what, kvc_status_name(ref_rc));
        cr_expect_str_eq(ref_err.message, err.message, "%s, %s: the reference's message differs", s->name, row->what);
        cr_expect_eq(memcmp(before, fixture, s->size), 0, "%s, %s: refused, but the reference wrote", s->name, row->what);
        free(before);
    }
    free(fixture);
}

static void run_table(const stage *s, const mutation *rows, size_t count) {
    for (size_t i = 0; i < count; i++) run_row(s, &rows[i]);
}

#define RUN(stage, rows) run_table(&(stage), (rows), sizeof(rows) / sizeof((rows)[0]))

#define OK KVC_OK
#define PARAM KVC_ERR_PARAM
#define INDEX KVC_ERR_INDEX
#define CONFLICT KVC_ERR_CONFLICT
#define METADATA KVC_ERR_METADATA

/* ---- baselines: accepted, and the rows SPEC.md names are the rows written */

Test(validate_api, save_baseline_writes_its_three_state_rows) {
    save_fixture *f = new_fixture(&save_stage);
    kvc_error err;
    cr_assert_eq(kvc_validate_v4_save(&f->args, &err), KVC_OK, "%s", err.message);
    cr_assert_eq(ref_v4_save_partial_states(&f->args, &err), KVC_OK, "%s", err.message);
    /* S1: slot s = slot_mapping[t] holds kv[t] bit for bit. */
    const int64_t token_of_slot[4] = {3, 0, 1, -1};
    for (int64_t slot = 0; slot < 4; slot++) {
        const uint8_t *row = kvc_plain_row(&f->args.state_cache, slot, SAVE_ROW);
        if (token_of_slot[slot] < 0) cr_expect(all_canary(row, SAVE_ROW), "state row %lld written", (long long)slot);
        else cr_expect_eq(memcmp(row, f->kv + token_of_slot[slot] * SAVE_W, SAVE_W * 4), 0, "state row %lld", (long long)slot);
    }
    expect_padding_intact(&f->args.state_cache, "state_cache");
    free(f);
}

Test(validate_api, compress_baseline_writes_the_closing_tokens_rows) {
    compress_fixture *f = new_fixture(&compress_stage);
    kvc_error err;
    cr_assert_eq(kvc_validate_v4_compress(&f->args, &err), KVC_OK, "%s", err.message);
    cr_assert_eq(ref_v4_compress(&f->args, &err), KVC_OK, "%s", err.message);
    /* kv rows 0, 1, 3 belong to closing tokens; row 2 to token 1, which does not close. */
    for (int64_t slot = 0; slot < 4; slot++) {
        int written = !all_canary(kvc_indexer_token(&f->args.kv_cache, slot), KVC_FP8_INDEXER_TOKEN_BYTES) ||
                      !all_canary(kvc_indexer_scale(&f->args.kv_cache, slot), KVC_FP8_INDEXER_SCALE_BYTES);
        cr_expect_eq(written, slot != 2, "kv row %lld", (long long)slot);
    }
    expect_padding_intact(&f->args.kv_cache, "kv_cache");
    free(f);
}

Test(validate_api, norm_baseline_writes_latents_then_ring_rows) {
    norm_fixture *f = new_fixture(&norm_stage);
    kvc_error err;
    cr_assert_eq(kvc_validate_v41_norm(&f->args, &err), KVC_OK, "%s", err.message);
    cr_assert_eq(ref_v41_save_compress_norm(&f->args, &err), KVC_OK, "%s", err.message);
    for (int t = 0; t < NORM_T; t++) {
        int closing = t == 1 || t == 3 || t == 5;
        cr_expect_eq(!all_canary((const uint8_t *)(f->latent + t * KVC_V41_HEAD_DIM), 2 * KVC_V41_HEAD_DIM), closing, "latent row %d", t);
    }
    /* Every valid token's row is copied bit for bit to its ring slot. */
    int stored[NORM_BLOCKS * NORM_CAP] = {0};
    for (int t = 0; t < NORM_T; t++) {
        int64_t slot = f->slot_mapping[t];
        if (slot < 0) continue;
        stored[slot] = 1;
        cr_expect_eq(memcmp(kvc_plain_row(&f->args.state_cache, slot, NORM_RING_ROW), f->kv_score + t * 2 * KVC_V41_HEAD_DIM,
                            NORM_RING_ROW), 0, "ring slot %lld", (long long)slot);
    }
    for (int slot = 0; slot < NORM_BLOCKS * NORM_CAP; slot++)
        if (!stored[slot]) cr_expect(all_canary(kvc_plain_row(&f->args.state_cache, slot, NORM_RING_ROW), NORM_RING_ROW), "ring slot %d written", slot);
    expect_padding_intact(&f->args.state_cache, "state_cache");
    free(f);
}

static void expect_insert_rows(const stage *s, int expect_quant) {
    insert_fixture *f = new_fixture(s);
    kvc_error err;
    cr_assert_eq(kvc_validate_v41_insert(&f->args, expect_quant, &err), KVC_OK, "%s: %s", s->name, err.message);
    cr_assert_eq(s->reference(f, &err), KVC_OK, "%s: %s", s->name, err.message);
    int64_t row_bytes = kvc_cache_row_bytes(f->args.cache_dtype);
    for (int64_t slot = 0; slot < 4; slot++) {
        int written;
        if (expect_quant)
            written = !all_canary(kvc_ds_mla_token(&f->args.kv_cache, slot), KVC_FP8_DS_MLA_TOKEN_BYTES) ||
                      !all_canary(kvc_ds_mla_scales(&f->args.kv_cache, slot), KVC_FP8_DS_MLA_SCALE_BYTES);
        else
            written = !all_canary(kvc_plain_row(&f->args.kv_cache, slot, row_bytes), (size_t)row_bytes);
        cr_expect_eq(written, slot == 0 || slot == 2, "%s: kv row %lld", s->name, (long long)slot);
    }
    expect_padding_intact(&f->args.kv_cache, s->name);
    free(f);
}

Test(validate_api, insert_baselines_write_the_closing_tokens_rows) {
    expect_insert_rows(&quant_stage, 1);
    expect_insert_rows(&bf16_stage, 0);
    expect_insert_rows(&fp8_stage, 0);
}

/* ---- v4.save_partial_states --------------------------------------------- */

#define FIXTURE save_fixture
static const mutation save_rows[] = {
    {"compress_ratio 8", {SET(args.compress_ratio, 8)}, PARAM, {"compress_ratio"}},
    {"compress_ratio 2 (a V4.1 ratio)", {SET(args.compress_ratio, 2)}, PARAM, {"compress_ratio"}},
    {"head_dim 256", {SET(args.head_dim, 256)}, PARAM, {"head_dim"}},
    {"num_tokens -1", {SET(args.num_tokens, -1)}, PARAM, {"num_tokens"}},
    {"num_tokens INT64_MIN", {SET(args.num_tokens, INT64_MIN)}, PARAM, {"num_tokens"}},
    {"num_pages -1", {SET(args.state_cache.num_pages, -1)}, PARAM, {"state_cache", "num_pages"}},
    {"num_tokens 2^40 + 1 (sizes past int64)", {SET(args.num_tokens, ((int64_t)1 << 40) + 1)}, PARAM, {"num_tokens", "2^40"}},
    {"pages x page_stride overflows int64", {SET(args.state_cache.page_stride, (int64_t)1 << 62)}, PARAM, {"state_cache", "2^56"}},
    {"pages x page_stride past 2^56", {SET(args.state_cache.page_stride, (int64_t)1 << 55), SET(args.state_cache.num_pages, 3)}, PARAM, {"state_cache", "2^56"}},
    {"page_rows 0", {SET(args.state_cache.page_rows, 0)}, PARAM, {"state_cache", "page_rows"}},
    {"page_rows -2", {SET(args.state_cache.page_rows, -2)}, PARAM, {"state_cache", "page_rows"}},
    {"page_rows 2^24 + 1, page_bytes unchanged", {SET(args.state_cache.page_rows, (1 << 24) + 1)}, PARAM, {"state_cache", "page_rows"}},
    {"page_rows INT64_MAX", {SET(args.state_cache.page_rows, INT64_MAX)}, PARAM, {"state_cache", "page_rows"}},
    {"page_bytes one row short", {SET(args.state_cache.page_bytes, SAVE_PAGE - SAVE_ROW)}, PARAM, {"state_cache", "page_bytes"}},
    {"page_bytes one byte over", {SET(args.state_cache.page_bytes, SAVE_PAGE + 1)}, PARAM, {"state_cache", "page_bytes"}},
    {"page_stride below page_bytes", {SET(args.state_cache.page_stride, SAVE_PAGE - 4)}, PARAM, {"state_cache", "page_stride"}},
    {"page_stride not 4-byte aligned", {SET(args.state_cache.page_stride, SAVE_STRIDE + 2)}, PARAM, {"state_cache", "page_stride"}},
    {"data not 4-byte aligned", {SHIFT(args.state_cache.data, 2)}, PARAM, {"state_cache", "data"}},
    {"data NULL", {NUL(args.state_cache.data)}, PARAM, {"state_cache", "data"}},
    {"kv NULL", {NUL(args.kv)}, PARAM, {"kv"}},
    {"score NULL", {NUL(args.score)}, PARAM, {"score"}},
    {"ape NULL", {NUL(args.ape)}, PARAM, {"ape"}},
    {"ape NULL without tokens", {SET(args.num_tokens, 0), NUL(args.ape)}, PARAM, {"ape"}},
    {"positions NULL", {NUL(args.positions)}, PARAM, {"positions"}},
    {"slot_mapping NULL", {NUL(args.slot_mapping)}, PARAM, {"slot_mapping"}},
    {"kv inside state_cache", {INTO(args.kv, args.state_cache.data, SAVE_ROW)}, CONFLICT, {"state_cache", "kv"}},
    {"kv running into state_cache", {INTO(args.kv, args.state_cache.data, -64)}, CONFLICT, {"state_cache", "kv"}},
    {"score inside state_cache", {INTO(args.score, args.state_cache.data, 0)}, CONFLICT, {"state_cache", "score"}},
    {"ape inside state_cache's last page", {INTO(args.ape, args.state_cache.data, SAVE_STRIDE)}, CONFLICT, {"state_cache", "ape"}},
    {"kv after state_cache", {PLACE(args.kv, spare)}, OK, {0}},
    {"score after state_cache", {PLACE(args.score, spare)}, OK, {0}},
    {"ape after state_cache", {PLACE(args.ape, spare)}, OK, {0}},
    {"positions inside state_cache", {MOVE(args.positions, args.state_cache.data, 64, SAVE_T * 8)}, CONFLICT, {"state_cache", "positions"}},
    {"slot_mapping inside state_cache", {MOVE(args.slot_mapping, args.state_cache.data, SAVE_STRIDE + 8, SAVE_T * 8)}, CONFLICT, {"state_cache", "slot_mapping"}},
    {"slot_mapping[1] one past the cache", {SET(slot_mapping[1], SAVE_PAGES * SAVE_ROWS)}, INDEX, {"slot_mapping[1]", "state_cache"}},
    {"slot_mapping[0] INT64_MAX", {SET(slot_mapping[0], INT64_MAX)}, INDEX, {"slot_mapping[0]", "state_cache"}},
    {"slot_mapping[0] INT64_MIN: padding", {SET(slot_mapping[0], INT64_MIN)}, OK, {0}},
    {"two tokens one state row", {SET(slot_mapping[3], 1)}, CONFLICT, {"slot_mapping[3]", "token 0"}},
    {"no tokens", {SET(args.num_tokens, 0)}, OK, {0}},
    {"no tokens, NULL tensors", {SET(args.num_tokens, 0), NUL(args.kv), NUL(args.score), NUL(args.positions), NUL(args.slot_mapping)}, OK, {0}},
    {"empty state cache, NULL data, only padding",
     {SET(args.state_cache.num_pages, 0), NUL(args.state_cache.data), SET(slot_mapping[0], -1), SET(slot_mapping[1], -1), SET(slot_mapping[3], -1)}, OK, {0}},
    {"empty state cache: every slot is past it", {SET(args.state_cache.num_pages, 0)}, INDEX, {"slot_mapping[0]", "state_cache"}},
    {"a padding token's slot past the cache would still be padding", {SET(slot_mapping[2], -7)}, OK, {0}},
};
#undef FIXTURE

Test(validate_api, save_partial_states_rejections) { RUN(save_stage, save_rows); }

/* ---- v4.compress -------------------------------------------------------- */

#define FIXTURE compress_fixture
static const mutation compress_rows[] = {
    {"compress_ratio 2", {SET(args.compress_ratio, 2)}, PARAM, {"compress_ratio"}},
    {"head_dim 64", {SET(args.head_dim, 64)}, PARAM, {"head_dim"}},
    {"num_tokens -1", {SET(args.num_tokens, -1)}, PARAM, {"num_tokens"}},
    {"eps -0.001", {SETF(args.eps, -1e-3f)}, PARAM, {"eps"}},
    {"block_table entries past 2^40", {SET(args.num_requests, (int64_t)1 << 40)}, PARAM, {"block_table", "2^40"}},
    {"block_table shape overflows int64", {SET(args.num_requests, (int64_t)1 << 40), SET(args.max_blocks, (int64_t)1 << 40)}, PARAM,
     {"block_table", "2^40"}},
    {"cos_sin rows 2^40 + 1", {SET(args.cos_sin_rows, ((int64_t)1 << 40) + 1)}, PARAM, {"cos_sin", "2^40"}},
    {"eps 1.5", {SETF(args.eps, 1.5f)}, PARAM, {"eps"}},
    {"eps NaN", {SETF(args.eps, NAN)}, PARAM, {"eps"}},
    {"eps +inf", {SETF(args.eps, INFINITY)}, PARAM, {"eps"}},
    {"eps 0", {SETF(args.eps, 0.0f)}, OK, {0}},
    {"eps -0 (in [0, 1])", {SETF(args.eps, -0.0f)}, OK, {0}},
    {"eps 1", {SETF(args.eps, 1.0f)}, OK, {0}},
    {"eps the next float above 1", {SETF(args.eps, 0x1.000002p0f)}, PARAM, {"eps"}},
    {"state_cache page_rows 0", {SET(args.state_cache.page_rows, 0)}, PARAM, {"state_cache", "page_rows"}},
    {"state_cache page_bytes one row short", {SET(args.state_cache.page_bytes, CMP_STATE_PAGE - CMP_STATE_ROW)}, PARAM, {"state_cache", "page_bytes"}},
    {"state_cache data NULL", {NUL(args.state_cache.data)}, PARAM, {"state_cache", "data"}},
    {"state_cache data not 4-byte aligned", {SHIFT(args.state_cache.data, 1)}, PARAM, {"state_cache", "data"}},
    {"kv_cache num_pages -1", {SET(args.kv_cache.num_pages, -1)}, PARAM, {"kv_cache", "num_pages"}},
    {"kv_cache page_bytes without the scales", {SET(args.kv_cache.page_bytes, CMP_KV_ROWS * KVC_FP8_INDEXER_TOKEN_BYTES)}, PARAM, {"kv_cache", "page_bytes"}},
    {"kv_cache page_bytes of fp8_ds_mla rows (the D = 512 layout)",
     {SET(args.kv_cache.page_bytes, CMP_KV_ROWS * 584), SET(args.kv_cache.page_stride, CMP_KV_ROWS * 584)}, PARAM, {"kv_cache", "page_bytes"}},
    {"kv_cache page_stride below page_bytes", {SET(args.kv_cache.page_stride, CMP_KV_PAGE - 1)}, PARAM, {"kv_cache", "page_stride"}},
    {"kv_cache data NULL", {NUL(args.kv_cache.data)}, PARAM, {"kv_cache", "data"}},
    {"kv_cache 1 byte off (fp8 rows need no alignment)", {SHIFT(args.kv_cache.data, 1), SET(args.kv_cache.page_stride, CMP_KV_STRIDE - 1)}, OK, {0}},
    {"num_requests -1", {SET(args.num_requests, -1)}, PARAM, {"block_table"}},
    {"max_blocks -1", {SET(args.max_blocks, -1)}, PARAM, {"block_table"}},
    {"cos_sin rows -1", {SET(args.cos_sin_rows, -1)}, PARAM, {"cos_sin"}},
    {"positions NULL", {NUL(args.positions)}, PARAM, {"positions"}},
    {"slot_mapping NULL", {NUL(args.slot_mapping)}, PARAM, {"slot_mapping"}},
    {"kv_slot_mapping NULL", {NUL(args.kv_slot_mapping)}, PARAM, {"kv_slot_mapping"}},
    {"token_to_req NULL", {NUL(args.token_to_req)}, PARAM, {"token_to_req"}},
    {"block_table NULL", {NUL(args.block_table)}, PARAM, {"block_table"}},
    {"norm_weight NULL", {NUL(args.norm_weight)}, PARAM, {"norm_weight"}},
    {"cos_sin NULL", {NUL(args.cos_sin)}, PARAM, {"cos_sin"}},
    {"state_cache inside kv_cache", {INTO(args.state_cache.data, args.kv_cache.data, 0)}, CONFLICT, {"kv_cache", "state_cache"}},
    {"norm_weight inside kv_cache", {INTO(args.norm_weight, args.kv_cache.data, 4)}, CONFLICT, {"kv_cache", "norm_weight"}},
    {"cos_sin running into kv_cache", {INTO(args.cos_sin, args.kv_cache.data, -16)}, CONFLICT, {"kv_cache", "cos_sin"}},
    {"state_cache after kv_cache", {PLACE(args.state_cache.data, spare)}, OK, {0}},
    {"norm_weight after kv_cache", {PLACE(args.norm_weight, spare)}, OK, {0}},
    {"cos_sin after kv_cache", {PLACE(args.cos_sin, spare)}, OK, {0}},
    {"positions inside kv_cache", {MOVE(args.positions, args.kv_cache.data, 0, CMP_T * 8)}, CONFLICT, {"kv_cache", "positions"}},
    {"slot_mapping inside kv_cache", {MOVE(args.slot_mapping, args.kv_cache.data, 64, CMP_T * 8)}, CONFLICT, {"kv_cache", "slot_mapping"}},
    {"kv_slot_mapping inside kv_cache", {MOVE(args.kv_slot_mapping, args.kv_cache.data, 128, CMP_T * 8)}, CONFLICT, {"kv_cache", "kv_slot_mapping"}},
    {"token_to_req inside kv_cache", {MOVE(args.token_to_req, args.kv_cache.data, 200, CMP_T * 4)}, CONFLICT, {"kv_cache", "token_to_req"}},
    {"block_table inside kv_cache's last page",
     {MOVE(args.block_table, args.kv_cache.data, CMP_KV_STRIDE, CMP_REQUESTS * CMP_MAX_BLOCKS * 4)}, CONFLICT, {"kv_cache", "block_table"}},
    {"positions[0] -1", {SET(positions[0], -1)}, INDEX, {"positions[0]"}},
    {"slot_mapping[2] one past the state cache", {SET(slot_mapping[2], CMP_STATE_PAGES * CMP_BS)}, INDEX, {"slot_mapping[2]", "state_cache"}},
    {"kv_slot_mapping[2] one past the kv cache", {SET(kv_slot_mapping[2], CMP_KV_PAGES * CMP_KV_ROWS)}, INDEX, {"kv_slot_mapping[2]", "kv_cache"}},
    {"kv_slot_mapping[3] INT64_MAX", {SET(kv_slot_mapping[3], INT64_MAX)}, INDEX, {"kv_slot_mapping[3]", "kv_cache"}},
    {"token_to_req[3] = num_requests", {SET(token_to_req[3], CMP_REQUESTS)}, INDEX, {"token_to_req[3]"}},
    {"token_to_req[0] -1", {SET(token_to_req[0], -1)}, INDEX, {"token_to_req[0]"}},
    {"token_to_req[2] INT32_MIN", {SET(token_to_req[2], INT32_MIN)}, INDEX, {"token_to_req[2]"}},
    {"cos_sin row 4 of token 2 past a 4-row table", {SET(args.cos_sin_rows, 4)}, INDEX, {"cos_sin", "positions[2]"}},
    {"no cos_sin rows, NULL table", {SET(args.cos_sin_rows, 0), NUL(args.cos_sin)}, INDEX, {"cos_sin", "positions[0]"}},
    {"window of token 2 past a 1-column block table", {SET(args.max_blocks, 1)}, INDEX, {"block_table[0][1]"}},
    {"block_table[0][1] one past the state cache", {SET(block_table[1], CMP_STATE_PAGES)}, INDEX, {"block_table[0][1]", "state_cache"}},
    {"block_table[0][1] -1", {SET(block_table[1], -1)}, INDEX, {"block_table[0][1]", "state_cache"}},
    {"block_table[1][0] INT32_MIN", {SET(block_table[2], INT32_MIN)}, INDEX, {"block_table[1][0]", "state_cache"}},
    {"a block-table entry no window reads", {SET(block_table[3], INT32_MAX)}, OK, {0}},
    {"two closing tokens one kv row", {SET(kv_slot_mapping[3], 0)}, CONFLICT, {"kv_slot_mapping[3]", "token 0"}},
    {"two closing tokens one state slot (read only)", {SET(slot_mapping[3], 7)}, OK, {0}},
    {"non-closing token's kv slot repeats a closing one's", {SET(kv_slot_mapping[1], 0)}, OK, {0}},
    {"non-closing token's kv slot and request out of range", {SET(kv_slot_mapping[1], 99), SET(token_to_req[1], 99)}, OK, {0}},
    {"closing token without a state slot is skipped",
     {SET(slot_mapping[2], -1), SET(kv_slot_mapping[2], 99), SET(token_to_req[2], 99)}, OK, {0}},
    {"closing token without a kv slot is skipped", {SET(kv_slot_mapping[2], -1), SET(slot_mapping[2], 999), SET(token_to_req[2], -5)}, OK, {0}},
    {"no tokens, no requests, NULL tensors",
     {SET(args.num_tokens, 0), SET(args.num_requests, 0), NUL(args.block_table), NUL(args.positions), NUL(args.token_to_req), NUL(args.kv_slot_mapping)}, OK, {0}},
    {"empty kv cache: every kv slot is past it", {SET(args.kv_cache.num_pages, 0), NUL(args.kv_cache.data)}, INDEX, {"kv_slot_mapping[0]", "kv_cache"}},
};
#undef FIXTURE

Test(validate_api, compress_rejections) { RUN(compress_stage, compress_rows); }

/* ---- v41.save_compress_norm --------------------------------------------- */

#define FIXTURE norm_fixture
static const mutation norm_rows[] = {
    {"compress_ratio 4", {SET(args.compress_ratio, 4)}, PARAM, {"compress_ratio"}},
    {"num_tokens 2^40 + 1", {SET(args.num_tokens, ((int64_t)1 << 40) + 1)}, PARAM, {"num_tokens", "2^40"}},
    {"num_requests 2^40 + 1", {SET(args.num_requests, ((int64_t)1 << 40) + 1)}, PARAM, {"num_requests", "2^40"}},
    {"compress_ratio 0", {SET(args.compress_ratio, 0)}, PARAM, {"compress_ratio"}},
    {"num_tokens -1", {SET(args.num_tokens, -1)}, PARAM, {"num_tokens"}},
    {"eps NaN", {SETF(args.eps, NAN)}, PARAM, {"eps"}},
    {"eps -0.5", {SETF(args.eps, -0.5f)}, PARAM, {"eps"}},
    {"eps 2", {SETF(args.eps, 2.0f)}, PARAM, {"eps"}},
    {"eps 0", {SETF(args.eps, 0.0f)}, OK, {0}},
    {"eps 1", {SETF(args.eps, 1.0f)}, OK, {0}},
    {"kv_score NULL", {NUL(args.kv_score)}, PARAM, {"kv_score"}},
    {"positions NULL", {NUL(args.positions)}, PARAM, {"positions"}},
    {"slot_mapping NULL", {NUL(args.slot_mapping)}, PARAM, {"slot_mapping"}},
    {"latent NULL", {NUL(args.latent)}, PARAM, {"latent"}},
    {"norm_weight NULL", {NUL(args.norm_weight)}, PARAM, {"norm_weight"}},
    {"query_start_loc NULL", {NUL(args.query_start_loc)}, PARAM, {"query_start_loc"}},
    {"token_to_req NULL", {NUL(args.token_to_req)}, PARAM, {"token_to_req"}},
    {"kv_score inside latent", {INTO(args.kv_score, args.latent, 0)}, CONFLICT, {"latent", "kv_score"}},
    {"norm_weight inside latent", {INTO(args.norm_weight, args.latent, 2)}, CONFLICT, {"latent", "norm_weight"}},
    {"kv_score inside the ring", {INTO(args.kv_score, args.state_cache.data, NORM_STRIDE)}, CONFLICT, {"state_cache", "kv_score"}},
    {"latent inside the ring", {INTO(args.latent, args.state_cache.data, 4096)}, CONFLICT, {"state_cache", "latent"}},
    {"kv_score after the outputs", {PLACE(args.kv_score, spare)}, OK, {0}},
    {"latent after the ring", {PLACE(args.latent, spare)}, OK, {0}},
    {"positions inside latent", {MOVE(args.positions, args.latent, 0, NORM_T * 8)}, CONFLICT, {"latent", "positions"}},
    {"slot_mapping inside latent", {MOVE(args.slot_mapping, args.latent, 512, NORM_T * 8)}, CONFLICT, {"latent", "slot_mapping"}},
    {"token_to_req inside latent", {MOVE(args.token_to_req, args.latent, 2048, NORM_T * 4)}, CONFLICT, {"latent", "token_to_req"}},
    {"query_start_loc inside latent", {MOVE(args.query_start_loc, args.latent, 4000, (NORM_REQUESTS + 1) * 4)}, CONFLICT, {"latent", "query_start_loc"}},
    {"norm_weight inside the ring", {MOVE(args.norm_weight, args.state_cache.data, 4096, 1024)}, CONFLICT, {"state_cache", "norm_weight"}},
    {"positions inside the ring", {MOVE(args.positions, args.state_cache.data, 8, NORM_T * 8)}, CONFLICT, {"state_cache", "positions"}},
    {"slot_mapping inside the ring", {MOVE(args.slot_mapping, args.state_cache.data, 2 * NORM_STRIDE + 96, NORM_T * 8)}, CONFLICT, {"state_cache", "slot_mapping"}},
    {"token_to_req inside the ring", {MOVE(args.token_to_req, args.state_cache.data, 3 * 4096, NORM_T * 4)}, CONFLICT, {"state_cache", "token_to_req"}},
    {"query_start_loc inside the ring", {MOVE(args.query_start_loc, args.state_cache.data, 1000, (NORM_REQUESTS + 1) * 4)}, CONFLICT, {"state_cache", "query_start_loc"}},
    {"positions[1] -1", {SET(positions[1], -1)}, INDEX, {"positions[1]"}},
    {"ring num_pages -1", {SET(args.state_cache.num_pages, -1)}, PARAM, {"state_cache", "num_pages"}},
    {"ring page_rows 0", {SET(args.state_cache.page_rows, 0)}, PARAM, {"state_cache", "page_rows"}},
    {"ring page_bytes one row short", {SET(args.state_cache.page_bytes, NORM_PAGE - NORM_RING_ROW)}, PARAM, {"state_cache", "page_bytes"}},
    {"ring page_stride not 4-byte aligned", {SET(args.state_cache.page_stride, NORM_STRIDE + 1)}, PARAM, {"state_cache", "page_stride"}},
    {"ring data not 4-byte aligned", {SHIFT(args.state_cache.data, 2)}, PARAM, {"state_cache", "data"}},
    {"ring data NULL", {NUL(args.state_cache.data)}, PARAM, {"state_cache", "data"}},
    {"CAP 4: a power of two below 8", {SET(args.state_cache.page_rows, 4), SET(args.state_cache.page_bytes, 4 * NORM_RING_ROW)}, PARAM, {"CAP"}},
    {"CAP 12: not a power of two",
     {SET(args.state_cache.page_rows, 12), SET(args.state_cache.page_bytes, 12 * NORM_RING_ROW),
      SET(args.state_cache.page_stride, 12 * NORM_RING_ROW), SET(args.state_cache.num_pages, 1)}, PARAM, {"CAP"}},
    {"num_requests -1", {SET(args.num_requests, -1)}, PARAM, {"num_requests"}},
    {"query_start_loc[0] 1", {SET(query_start_loc[0], 1)}, METADATA, {"query_start_loc[0]"}},
    {"query_start_loc not monotone", {SET(query_start_loc[1], 7)}, METADATA, {"query_start_loc[2]"}},
    {"query_start_loc[3] past the batch", {SET(query_start_loc[3], NORM_T + 1)}, METADATA, {"query_start_loc[3]"}},
    {"query_start_loc[3] INT32_MAX", {SET(query_start_loc[3], INT32_MAX)}, METADATA, {"query_start_loc[3]"}},
    {"query_start_loc[1] INT32_MIN", {SET(query_start_loc[1], INT32_MIN)}, METADATA, {"query_start_loc[1]"}},
    {"a valid slot after query_start_loc[3]", {SET(query_start_loc[3], 6)}, METADATA, {"slot_mapping[6]"}},
    {"trailing padding with a slot", {SET(slot_mapping[7], 0)}, METADATA, {"slot_mapping[7]"}},
    {"trailing padding's token_to_req and position arbitrary", {SET(token_to_req[7], INT32_MIN), SET(positions[7], INT64_MIN)}, OK, {0}},
    {"token_to_req[4] names another request", {SET(token_to_req[4], 0)}, METADATA, {"token_to_req[4]"}},
    {"token_to_req[0] -1", {SET(token_to_req[0], -1)}, METADATA, {"token_to_req[0]"}},
    {"positions[2] skips one", {SET(positions[2], 7)}, METADATA, {"positions[2]"}},
    {"padding row inside a chunk off the sequence", {SET(positions[4], 5)}, METADATA, {"positions[4]"}},
    {"ring slot not at p mod CAP", {SET(slot_mapping[2], 15)}, METADATA, {"slot_mapping[2]"}},
    {"two ring blocks in one request", {SET(slot_mapping[2], 6)}, METADATA, {"slot_mapping[2]"}},
    {"two requests one ring block", {SET(slot_mapping[3], 9), SET(slot_mapping[5], 11)}, CONFLICT, {"slot_mapping[3]", "ring block"}},
    {"a one-token request in another's ring block", {SET(slot_mapping[6], 8)}, CONFLICT, {"slot_mapping[6]", "ring block"}},
    {"ring slot past the ring", {SET(slot_mapping[0], NORM_BLOCKS * NORM_CAP + 4)}, INDEX, {"slot_mapping[0]", "state_cache"}},
    {"ring slot INT64_MAX", {SET(slot_mapping[0], INT64_MAX)}, INDEX, {"slot_mapping[0]", "state_cache"}},
    {"a padding row inside a chunk with slot INT64_MIN", {SET(slot_mapping[4], INT64_MIN)}, OK, {0}},
    {"no requests, no tokens", {SET(args.num_tokens, 0), SET(args.num_requests, 0)}, OK, {0}},
    {"no tokens, NULL tensors",
     {SET(args.num_tokens, 0), SET(args.num_requests, 0), NUL(args.kv_score), NUL(args.latent), NUL(args.token_to_req), NUL(args.slot_mapping)}, OK, {0}},
    /* R = 1: no pooling; the ring, query_start_loc and token_to_req are not read. */
    {"R = 1 ignores the ring and its metadata",
     {SET(args.compress_ratio, 1), NUL(args.query_start_loc), NUL(args.token_to_req), SET(args.state_cache.page_rows, 0), NUL(args.state_cache.data)}, OK, {0}},
    {"R = 1 positions need not follow", {SET(args.compress_ratio, 1), SET(positions[2], 100)}, OK, {0}},
    {"R = 1 positions[1] -1", {SET(args.compress_ratio, 1), SET(positions[1], -1)}, INDEX, {"positions[1]"}},
    {"R = 1 positions inside the ring it does not use", {SET(args.compress_ratio, 1), MOVE(args.positions, args.state_cache.data, 8, NORM_T * 8)}, OK, {0}},
    {"R = 1 positions inside latent", {SET(args.compress_ratio, 1), MOVE(args.positions, args.latent, 64, NORM_T * 8)}, CONFLICT, {"latent", "positions"}},
    {"R = 1 latent NULL", {SET(args.compress_ratio, 1), NUL(args.latent)}, PARAM, {"latent"}},
    {"R = 1 kv_score inside latent", {SET(args.compress_ratio, 1), INTO(args.kv_score, args.latent, 1024)}, CONFLICT, {"latent", "kv_score"}},
};
#undef FIXTURE

Test(validate_api, save_compress_norm_rejections) { RUN(norm_stage, norm_rows); }

/* ---- v41.rope_quant_insert and rope_plain_insert ------------------------ */

#define FIXTURE insert_fixture
/* Rules every insert shares, run on each of the three caches. */
static const mutation insert_rows[] = {
    {"compress_ratio 3", {SET(args.compress_ratio, 3)}, PARAM, {"compress_ratio"}},
    {"num_tokens 2^40 + 1", {SET(args.num_tokens, ((int64_t)1 << 40) + 1)}, PARAM, {"num_tokens", "2^40"}},
    {"cos_sin rows 2^40 + 1", {SET(args.cos_sin_rows, ((int64_t)1 << 40) + 1)}, PARAM, {"cos_sin", "2^40"}},
    {"compress_ratio 4 (a V4 ratio)", {SET(args.compress_ratio, 4)}, PARAM, {"compress_ratio"}},
    {"num_tokens -1", {SET(args.num_tokens, -1)}, PARAM, {"num_tokens"}},
    {"cache_dtype fp8_indexer", {SET(args.cache_dtype, KVC_CACHE_FP8_INDEXER)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"cache_dtype 7", {SET(args.cache_dtype, 7)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"kv_cache page_rows 0", {SET(args.kv_cache.page_rows, 0)}, PARAM, {"kv_cache", "page_rows"}},
    {"kv_cache page_bytes one byte short", {ADD(args.kv_cache.page_bytes, -1)}, PARAM, {"kv_cache", "page_bytes"}},
    {"kv_cache page_stride below page_bytes", {ADD(args.kv_cache.page_stride, -PAD - 2)}, PARAM, {"kv_cache", "page_stride"}},
    {"kv_cache data NULL", {NUL(args.kv_cache.data)}, PARAM, {"kv_cache", "data"}},
    {"cos_sin rows -1", {SET(args.cos_sin_rows, -1)}, PARAM, {"cos_sin"}},
    {"latent NULL", {NUL(args.latent)}, PARAM, {"latent"}},
    {"positions NULL", {NUL(args.positions)}, PARAM, {"positions"}},
    {"slot_mapping NULL", {NUL(args.slot_mapping)}, PARAM, {"slot_mapping"}},
    {"cos_sin NULL", {NUL(args.cos_sin)}, PARAM, {"cos_sin"}},
    {"latent inside kv_cache", {INTO(args.latent, args.kv_cache.data, 8)}, CONFLICT, {"kv_cache", "latent"}},
    {"cos_sin running into kv_cache", {INTO(args.cos_sin, args.kv_cache.data, -32)}, CONFLICT, {"kv_cache", "cos_sin"}},
    {"latent after kv_cache", {PLACE(args.latent, spare)}, OK, {0}},
    {"cos_sin after kv_cache", {PLACE(args.cos_sin, spare)}, OK, {0}},
    {"positions inside kv_cache", {MOVE(args.positions, args.kv_cache.data, 16, INS_T * 8)}, CONFLICT, {"kv_cache", "positions"}},
    {"slot_mapping inside kv_cache", {MOVE(args.slot_mapping, args.kv_cache.data, 600, INS_T * 8)}, CONFLICT, {"kv_cache", "slot_mapping"}},
    {"positions[0] -1", {SET(positions[0], -1)}, INDEX, {"positions[0]"}},
    {"slot_mapping[2] one past the cache", {SET(slot_mapping[2], INS_PAGES * INS_ROWS)}, INDEX, {"slot_mapping[2]", "kv_cache"}},
    {"slot_mapping[0] INT64_MAX", {SET(slot_mapping[0], INT64_MAX)}, INDEX, {"slot_mapping[0]", "kv_cache"}},
    {"cos_sin row 2 of token 2 past a 2-row table", {SET(args.cos_sin_rows, 2)}, INDEX, {"cos_sin", "positions[2]"}},
    {"no cos_sin rows, NULL table", {SET(args.cos_sin_rows, 0), NUL(args.cos_sin)}, INDEX, {"cos_sin", "positions[0]"}},
    {"two closing tokens one row", {SET(slot_mapping[2], 0)}, CONFLICT, {"slot_mapping[2]", "token 0"}},
    {"non-closing token's row repeats a closing one's", {SET(slot_mapping[1], 0)}, OK, {0}},
    {"non-closing token's row past the cache", {SET(slot_mapping[1], 99)}, OK, {0}},
    {"padding token's slot INT64_MIN", {SET(slot_mapping[3], INT64_MIN)}, OK, {0}},
    {"R = 1: every valid token closes", {SET(args.compress_ratio, 1)}, OK, {0}},
    {"R = 1: the non-closing token's row now conflicts", {SET(args.compress_ratio, 1), SET(slot_mapping[1], 0)}, CONFLICT, {"slot_mapping[1]", "token 0"}},
    {"R = 1: cos_sin row 3 past a 3-row table", {SET(args.compress_ratio, 1), SET(args.cos_sin_rows, 3)}, INDEX, {"cos_sin", "positions[2]"}},
    {"no tokens, NULL tensors", {SET(args.num_tokens, 0), NUL(args.latent), NUL(args.positions), NUL(args.slot_mapping)}, OK, {0}},
    {"empty kv cache: every slot is past it", {SET(args.kv_cache.num_pages, 0), NUL(args.kv_cache.data)}, INDEX, {"slot_mapping[0]", "kv_cache"}},
};

static const mutation quant_rows[] = {
    {"cache_dtype bf16", {SET(args.cache_dtype, KVC_CACHE_BF16)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"cache_dtype fp8_e4m3", {SET(args.cache_dtype, KVC_CACHE_FP8_E4M3), SETF(args.fp8_scale, 1.0f)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"page_bytes of plain fp8 rows", {SET(args.kv_cache.page_bytes, INS_ROWS * KVC_V41_HEAD_DIM)}, PARAM, {"kv_cache", "page_bytes"}},
    {"data 1 byte off (fp8 rows need no alignment)", {SHIFT(args.kv_cache.data, 1)}, OK, {0}},
    {"odd page_stride (fp8 rows need no alignment)", {ADD(args.kv_cache.page_stride, 1)}, OK, {0}},
};

static const mutation bf16_rows[] = {
    {"cache_dtype fp8_ds_mla", {SET(args.cache_dtype, KVC_CACHE_FP8_DS_MLA)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"page_bytes of fp8 rows", {SET(args.kv_cache.page_bytes, INS_ROWS * KVC_V41_HEAD_DIM)}, PARAM, {"kv_cache", "page_bytes"}},
    {"data 1 byte off", {SHIFT(args.kv_cache.data, 1)}, PARAM, {"kv_cache", "data"}},
    {"odd page_stride", {ADD(args.kv_cache.page_stride, 1)}, PARAM, {"kv_cache", "page_stride"}},
    {"data 2 bytes off", {SHIFT(args.kv_cache.data, 2)}, OK, {0}},
};

static const mutation fp8_rows[] = {
    {"cache_dtype fp8_ds_mla", {SET(args.cache_dtype, KVC_CACHE_FP8_DS_MLA)}, PARAM, {"kv_cache", "cache_dtype"}},
    {"page_bytes of bf16 rows", {SET(args.kv_cache.page_bytes, INS_ROWS * 2 * KVC_V41_HEAD_DIM)}, PARAM, {"kv_cache", "page_bytes"}},
    {"fp8_scale 0", {SETF(args.fp8_scale, 0.0f)}, PARAM, {"fp8_scale"}},
    {"fp8_scale -0", {SETF(args.fp8_scale, -0.0f)}, PARAM, {"fp8_scale"}},
    {"fp8_scale -1", {SETF(args.fp8_scale, -1.0f)}, PARAM, {"fp8_scale"}},
    {"fp8_scale +inf", {SETF(args.fp8_scale, INFINITY)}, PARAM, {"fp8_scale"}},
    {"fp8_scale -inf", {SETF(args.fp8_scale, -INFINITY)}, PARAM, {"fp8_scale"}},
    {"fp8_scale NaN", {SETF(args.fp8_scale, NAN)}, PARAM, {"fp8_scale"}},
    {"fp8_scale the largest finite", {SETF(args.fp8_scale, FLT_MAX)}, OK, {0}},
    {"fp8_scale the smallest subnormal", {SETF(args.fp8_scale, 0x1p-149f)}, OK, {0}},
    {"data 1 byte off (fp8 rows need no alignment)", {SHIFT(args.kv_cache.data, 1)}, OK, {0}},
};
#undef FIXTURE

Test(validate_api, rope_quant_insert_rejections) {
    RUN(quant_stage, insert_rows);
    RUN(quant_stage, quant_rows);
}

Test(validate_api, rope_plain_insert_rejections) {
    RUN(bf16_stage, insert_rows);
    RUN(bf16_stage, bf16_rows);
    RUN(fp8_stage, insert_rows);
    RUN(fp8_stage, fp8_rows);
}

/* ---- int64 extremes of positions, every stage --------------------------- */

#define P40 ((int64_t)1 << 40)

/* One token of a baseline moved to each extreme.  In range (0 and 2^40)
 * the verdict depends on the stage (SPEC.md: does the token close, is its
 * cos_sin row in the table, must it follow its predecessor); past the
 * range (2^40 + 1, INT64_MAX, INT64_MIN, -1) a token that writes or is
 * pooled is an index error, and a padding token's position is never
 * checked. */
typedef struct {
    const stage *s;
    const char *what;
    edit setup;          /* e.g. R = 1 */
    int64_t token;
    int at_zero, at_2p40, beyond;
    const char *name_2p40;   /* what a refusal of 2^40 names besides positions[token] */
} extreme_case;

#define R1(type) {EDIT_INT, offsetof(type, args.compress_ratio), sizeof(int32_t), 1, 0.0f, 0}

static void run_extremes(const extreme_case *c) {
    const int64_t values[] = {0, P40, P40 + 1, INT64_MAX, INT64_MIN, -1};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char what[160], index[40];
        snprintf(what, sizeof what, "%s, positions[%lld] = %lld", c->what, (long long)c->token, (long long)values[i]);
        snprintf(index, sizeof index, "positions[%lld]", (long long)c->token);
        mutation row = {what, {c->setup, {EDIT_INT, c->s->positions_at + (size_t)c->token * 8, 8, values[i], 0.0f, 0}}, 0, {index, NULL}};
        row.code = i == 0 ? c->at_zero : i == 1 ? c->at_2p40 : c->beyond;
        if (i == 1 && c->name_2p40) row.names[1] = c->name_2p40;
        run_row(c->s, &row);
    }
}

static const extreme_case extreme_cases[] = {
    {&save_stage, "a writing token", {0}, 1, OK, OK, INDEX, NULL},
    {&save_stage, "a padding token", {0}, 2, OK, OK, OK, NULL},
    /* 0 and 2^40 do not close a group of 4: the token is valid but writes nothing. */
    {&compress_stage, "a closing token", {0}, 2, OK, OK, INDEX, NULL},
    {&compress_stage, "a valid non-closing token", {0}, 1, OK, OK, INDEX, NULL},
    {&compress_stage, "a padding token", {0}, 4, OK, OK, OK, NULL},
    {&compress_stage, "a token without a kv slot", {0}, 5, OK, OK, OK, NULL},
    /* Token 6 is a one-token request in ring row 0: 0 and 2^40 both live there. */
    {&norm_stage, "a one-token request", {0}, 6, OK, OK, INDEX, NULL},
    {&norm_stage, "a request's last token", {0}, 2, METADATA, METADATA, INDEX, NULL},
    {&norm_stage, "trailing padding", {0}, 7, OK, OK, OK, NULL},
    /* A padding row opening request 1's chunk: its successor (position 2)
     * must follow it, which only position 1 does. */
    {&norm_stage, "a padding row opening a chunk", {EDIT_INT, offsetof(norm_fixture, slot_mapping[3]), 8, -1, 0.0f, 0}, 3,
     METADATA, METADATA, METADATA, NULL},
    {&norm_stage, "R = 1, a valid token", R1(norm_fixture), 2, OK, OK, INDEX, NULL},
    {&norm_stage, "R = 1, trailing padding", R1(norm_fixture), 7, OK, OK, OK, NULL},
    /* R = 2: 0 and 2^40 are even, so the token does not close. */
    {&quant_stage, "a closing token", {0}, 0, OK, OK, INDEX, NULL},
    {&quant_stage, "a padding token", {0}, 3, OK, OK, OK, NULL},
    /* R = 1: 2^40 closes, and its cos_sin row 2^40 is past the table. */
    {&quant_stage, "R = 1, a valid token", R1(insert_fixture), 0, OK, INDEX, INDEX, "cos_sin"},
    {&bf16_stage, "a closing token", {0}, 2, OK, OK, INDEX, NULL},
    {&bf16_stage, "R = 1, a valid token", R1(insert_fixture), 2, OK, INDEX, INDEX, "cos_sin"},
    {&fp8_stage, "a non-closing valid token", {0}, 1, OK, OK, INDEX, NULL},
    {&fp8_stage, "R = 1, a padding token", R1(insert_fixture), 3, OK, OK, OK, NULL},
};

Test(validate_api, int64_extremes_of_positions) {
    for (size_t i = 0; i < sizeof extreme_cases / sizeof extreme_cases[0]; i++) run_extremes(&extreme_cases[i]);
}

/* ---- status names (SPEC.md section 8's table) --------------------------- */

Test(validate_api, status_names) {
    cr_expect_str_eq(kvc_status_name(KVC_OK), "ok");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_PARAM), "bad-parameter");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_INDEX), "index-out-of-range");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_CONFLICT), "conflict");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_METADATA), "inconsistent-metadata");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_NOMEM), "out-of-memory");
    cr_expect_str_eq(kvc_status_name(KVC_ERR_UNAVAILABLE), "unavailable");
    cr_expect_str_eq(kvc_status_name(99), "unknown");
    cr_expect_str_eq(kvc_status_name(-1), "unknown");
}

Test(validate_api, kvc_fail_without_an_error_struct_returns_the_code) {
    cr_expect_eq(kvc_fail(NULL, KVC_ERR_METADATA, "%s", "ignored"), KVC_ERR_METADATA);
    kvc_error err;
    cr_expect_eq(kvc_fail(&err, KVC_ERR_INDEX, "x[%d] = %d", 3, 9), KVC_ERR_INDEX);
    cr_expect_eq(err.code, KVC_ERR_INDEX);
    cr_expect_str_eq(err.message, "x[3] = 9");
}
