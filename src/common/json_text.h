// JsonText: compact JSON written straight into a string, the same text
// nlohmann::json::dump() writes for the same document (no spaces, the same escapes:
// \" \\ \b \f \n \r \t, \u00XX in lower case for other control characters, UTF-8
// copied as it is), without building a tree first. For hot paths that encode a record
// whose shape they know (the head's write-ahead of every job change); keys are written
// in the order given, so a caller matching dump() gives them in sorted order.
//
// Numbers: integers only (dump()'s floating-point form is nlohmann's own; write such a
// value with raw(), as dump() wrote it). A string that is not valid UTF-8, which dump()
// refuses with an exception, makes ok() false; the text is then not to be used.
//
// Not thread-safe; one writer per string at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ag {

class JsonText {
 public:
  explicit JsonText(std::string& out) : out_(out) {}

  JsonText& begin_object() { return open('{'); }
  JsonText& end_object() { return close('}'); }
  JsonText& begin_array() { return open('['); }
  JsonText& end_array() { return close(']'); }
  // The key of the next value in the object being written.
  JsonText& key(std::string_view name);

  JsonText& string(std::string_view value);
  JsonText& integer(int64_t value);
  JsonText& unsigned_integer(uint64_t value);
  JsonText& boolean(bool value);
  JsonText& null();
  // A value that is JSON text already (as dump() wrote it).
  JsonText& raw(std::string_view json);

  // False once a string was not valid UTF-8.
  bool ok() const { return ok_; }

 private:
  // Before a value or an opening bracket: the comma between elements, none after a key.
  void separate();
  JsonText& open(char bracket);
  JsonText& close(char bracket);
  void append_escaped(std::string_view text);

  std::string& out_;
  bool first_ = true;       // nothing written yet in the innermost object or array
  bool after_key_ = false;  // the next value is a key's
  bool ok_ = true;
};

}  // namespace ag
