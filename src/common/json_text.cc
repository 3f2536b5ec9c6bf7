#include "common/json_text.h"

#include <charconv>

namespace ag {
namespace {

// The length of the well-formed UTF-8 sequence at `text[i]` (Unicode's table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF), or 0 when there is none:
// exactly what nlohmann's decoder accepts.
size_t utf8_sequence(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  auto in = [](unsigned b, unsigned low, unsigned high) { return b >= low && b <= high; };
  const unsigned b0 = byte(0);
  if (in(b0, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
  if (in(b0, 0xE0, 0xEF)) {
    const unsigned low = b0 == 0xE0 ? 0xA0 : 0x80, high = b0 == 0xED ? 0x9F : 0xBF;
    return in(byte(1), low, high) && in(byte(2), 0x80, 0xBF) ? 3 : 0;
  }
  if (in(b0, 0xF0, 0xF4)) {
    const unsigned low = b0 == 0xF0 ? 0x90 : 0x80, high = b0 == 0xF4 ? 0x8F : 0xBF;
    return in(byte(1), low, high) && in(byte(2), 0x80, 0xBF) && in(byte(3), 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

template <typename Integer>
void append_decimal(std::string& out, Integer value) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  out.append(buf, static_cast<size_t>(end - buf));
}

}  // namespace

void JsonText::separate() {
  if (after_key_) {
    after_key_ = false;
  } else if (!first_) {
    out_ += ',';
  }
  first_ = false;
}

JsonText& JsonText::open(char bracket) {
  separate();
  out_ += bracket;
  first_ = true;
  return *this;
}

JsonText& JsonText::close(char bracket) {
  out_ += bracket;
  first_ = false;
  return *this;
}

JsonText& JsonText::key(std::string_view name) {
  if (!first_) out_ += ',';
  first_ = false;
  out_ += '"';
  append_escaped(name);
  out_ += "\":";
  after_key_ = true;
  return *this;
}

JsonText& JsonText::string(std::string_view value) {
  separate();
  out_ += '"';
  append_escaped(value);
  out_ += '"';
  return *this;
}

JsonText& JsonText::integer(int64_t value) {
  separate();
  append_decimal(out_, value);
  return *this;
}

JsonText& JsonText::unsigned_integer(uint64_t value) {
  separate();
  append_decimal(out_, value);
  return *this;
}

JsonText& JsonText::boolean(bool value) {
  separate();
  out_ += value ? "true" : "false";
  return *this;
}

JsonText& JsonText::null() {
  separate();
  out_ += "null";
  return *this;
}

JsonText& JsonText::raw(std::string_view json) {
  separate();
  out_ += json;
  return *this;
}

void JsonText::append_escaped(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t plain_from = 0;  // the start of the bytes copied as they are, not yet appended
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      const size_t length = utf8_sequence(text, i);
      if (length == 0) {
        ok_ = false;
        return;
      }
      i += length;
      continue;
    }
    out_.append(text.data() + plain_from, i - plain_from);
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\b':
        out_ += "\\b";
        break;
      case '\f':
        out_ += "\\f";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default: {
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out_.append(escaped, sizeof escaped);
      }
    }
    plain_from = ++i;
  }
  out_.append(text.data() + plain_from, text.size() - plain_from);
}

}  // namespace ag
