// Memo of BPE results per pre-token word. Text repeats words constantly, so most words are looked
// up, not merged; a flat open-addressing table with its keys and ids in two arenas keeps a lookup
// to one hash and one memcmp. Full tables are cleared rather than evicted piecemeal.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace vrun::tok {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;

  WordCache() { clear(); }

  // Ids of word, or nullptr; count receives their number.
  const int32_t* find(std::string_view word, uint32_t& count) const {
    const uint64_t h = hash(word);
    for (uint64_t slot = h & kMask;; slot = (slot + 1) & kMask) {
      const Slot& s = slots_[slot];
      if (s.key_len == kEmpty) return nullptr;
      if (s.hash == h && s.key_len == word.size() && std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        count = s.n_ids;
        return ids_.data() + s.ids_off;
      }
    }
  }

  void insert(std::string_view word, const int32_t* ids, uint32_t count) {
    if (entries_ >= kSlots / 2 || count > 0xFFFF) {
      if (count > 0xFFFF) return;
      clear();
    }
    const uint64_t h = hash(word);
    uint64_t slot = h & kMask;
    while (slots_[slot].key_len != kEmpty) slot = (slot + 1) & kMask;
    slots_[slot] = Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(ids_.size()),
                        static_cast<uint16_t>(word.size()), static_cast<uint16_t>(count)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + count);
    ++entries_;
  }

 private:
  static constexpr size_t kSlots = 1 << 18;
  static constexpr uint64_t kMask = kSlots - 1;
  static constexpr uint16_t kEmpty = 0xFFFF;
  struct Slot {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids;
  };

  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t v;
      std::memcpy(&v, s.data() + i, 8);
      h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
  }

  void clear() {
    slots_.assign(kSlots, Slot{0, 0, 0, kEmpty, 0});
    keys_.clear();
    ids_.clear();
    entries_ = 0;
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t entries_ = 0;
};

}  // namespace vrun::tok
