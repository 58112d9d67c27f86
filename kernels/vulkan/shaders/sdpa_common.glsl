// What the sdpa kernels (sdpa.comp, sdpa_tile.comp, sdpa_coopmat.glsl, sdpa_decode.comp) share:
// the leading fields of their push constants (record_sdpa's push_words writes them), the head
// dims packed in one word, and the bounds of a local-attention window's keys.

// dims: D | Dv << 16 (both at most 256). win_l, win_r: with a window, the query at position p
// sees keys p - win_l .. p + win_r.
#define SDPA_PUSH_FIELDS                 \
  uint Lq, Lk, dims, Hq, Hkv;           \
  float scale;                          \
  uint q_sb, q_sh, q_sl;                \
  uint k_sb, k_sh, k_sl;                \
  uint v_sb, v_sh, v_sl;                \
  uint m_sb, m_sh, m_sl, m_sk;          \
  uint off_q, off_k, off_v, off_m, off_y; \
  uint nsplit, kchunk;                  \
  uint win_l, win_r;
#define HEAD_D (pc.dims & 0xffffu)
#define HEAD_DV (pc.dims >> 16u)

// The first key of query row `row`'s band, and one past the last, clipped to the Lk keys (row
// sits at position Lk - Lq + row).
uint band_begin(uint Lq, uint Lk, uint win_l, int row) {
  return uint(clamp(int(Lk) - int(Lq) + row - int(win_l), 0, int(Lk)));
}
uint band_end(uint Lq, uint Lk, uint win_r, int row) {
  return uint(clamp(int(Lk) - int(Lq) + row + int(win_r) + 1, 0, int(Lk)));
}
