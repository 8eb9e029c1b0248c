// GPU resolve of counter samples into Metal's layout.
//
// scratch: query results copied with vkCmdCopyQueryPoolResults (64-bit values,
//          each query followed by its availability word).
// table:   per sample index [state | occlusion << 8, link, link_gen, gen].
// dst:     the caller's buffer; results start at word p.dst_word.
// WGSL has no 64-bit integers: each u64 is two u32 words, low word first.

struct Params {
    first: u32,
    count: u32,
    dst_word: u32,
    kind: u32,          // 0 timestamp, 1 statistic
    stride_words: u32,  // words per query of the main pool (values + availability)
    occ_base_word: u32, // where the occlusion results start in scratch
    mask_lo: u32,
    mask_hi: u32,
    map_lo: u32,        // per statistic field: position in the query, 0xFE occlusion, 0xFF absent
    map_hi: u32,
    total: u32,         // sample count: bounds chain walks
    has_occlusion: u32,
}

@group(0) @binding(0) var<storage, read> scratch: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
var<immediate> p: Params;

const NONE: u32 = 0xffffffffu;
const FRESH: u32 = 0u;
const RECORDED: u32 = 1u;
const INVALIDATED: u32 = 2u;
const ALIAS: u32 = 3u;

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    let carry = select(0u, 1u, lo < a.x);
    return vec2<u32>(lo, a.y + b.y + carry);
}

fn put(word: u32, v: vec2<u32>) {
    dst[word] = v.x;
    dst[word + 1u] = v.y;
}

fn fill(word: u32, n: u32, v: u32) {
    for (var i = 0u; i < n * 2u; i = i + 1u) {
        dst[word + i] = v;
    }
}

fn state_of(s: u32) -> u32 { return table[s * 4u] & 0xffu; }
fn has_occ(s: u32) -> bool { return ((table[s * 4u] >> 8u) & 1u) == 1u; }

fn main_available(s: u32) -> bool {
    let w = s * p.stride_words + p.stride_words - 2u;
    return scratch[w] != 0u || scratch[w + 1u] != 0u;
}

fn field_pos(f: u32) -> u32 {
    if (f < 4u) {
        return (p.map_lo >> (f * 8u)) & 0xffu;
    }
    return (p.map_hi >> ((f - 4u) * 8u)) & 0xffu;
}

fn resolve_timestamp(s: u32, out: u32) {
    var src = s;
    let st = state_of(s);
    if (st == INVALIDATED) {
        put(out, vec2<u32>(0u, 0u));
        return;
    }
    if (st == ALIAS) {
        src = table[s * 4u + 1u];
        if (src >= p.total || table[src * 4u + 3u] != table[s * 4u + 2u] || state_of(src) != RECORDED) {
            fill(out, 1u, NONE);
            return;
        }
    } else if (st != RECORDED) {
        fill(out, 1u, NONE);
        return;
    }
    if (!main_available(src)) {
        fill(out, 1u, NONE);
        return;
    }
    let w = src * p.stride_words;
    put(out, vec2<u32>(scratch[w] & p.mask_lo, scratch[w + 1u] & p.mask_hi));
}

fn resolve_statistic(s: u32, out: u32) {
    if (state_of(s) != RECORDED || !main_available(s)) {
        fill(out, 8u, NONE);
        return;
    }
    var acc: array<vec2<u32>, 8>;
    for (var f = 0u; f < 8u; f = f + 1u) {
        acc[f] = vec2<u32>(0u, 0u);
    }
    var cur = table[s * 4u + 1u];
    var cur_gen = table[s * 4u + 2u];
    var steps = 0u;
    loop {
        if (cur == NONE) {
            break;
        }
        if (cur >= p.total || steps > p.total || table[cur * 4u + 3u] != cur_gen
            || state_of(cur) != RECORDED || !main_available(cur)) {
            fill(out, 8u, NONE);
            return;
        }
        for (var f = 0u; f < 8u; f = f + 1u) {
            let pos = field_pos(f);
            if (pos == 0xfeu) {
                if (has_occ(cur) && p.has_occlusion == 1u) {
                    let ow = p.occ_base_word + cur * 4u;
                    if (scratch[ow + 2u] == 0u && scratch[ow + 3u] == 0u) {
                        fill(out, 8u, NONE);
                        return;
                    }
                    acc[f] = add64(acc[f], vec2<u32>(scratch[ow], scratch[ow + 1u]));
                }
            } else if (pos != 0xffu) {
                let w = cur * p.stride_words + pos * 2u;
                acc[f] = add64(acc[f], vec2<u32>(scratch[w], scratch[w + 1u]));
            }
        }
        cur_gen = table[cur * 4u + 2u];
        cur = table[cur * 4u + 1u];
        steps = steps + 1u;
    }
    for (var f = 0u; f < 8u; f = f + 1u) {
        if (field_pos(f) == 0xffu) {
            put(out + f * 2u, vec2<u32>(NONE, NONE));
        } else {
            put(out + f * 2u, acc[f]);
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let k = gid.x;
    if (k >= p.count) {
        return;
    }
    let s = p.first + k;
    if (p.kind == 0u) {
        resolve_timestamp(s, p.dst_word + k * 2u);
    } else {
        resolve_statistic(s, p.dst_word + k * 16u);
    }
}
