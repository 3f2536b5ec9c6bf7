// AccessControl over a memory store and a fake clock: what each credential proves,
// that changes are durable and undone when the store fails, and the role policy.
#include "head/auth/access_control.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "fakes/fake_clock.h"
#include "head/store/memory_store.h"

namespace ag::head {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeClock;

class AccessControlTest : public ::testing::Test {
 protected:
  AccessControlTest() { EXPECT_TRUE(access_.bootstrap(kAdminToken, std::string(kJoinToken))); }

  template <typename T>
  Result<T> wait(std::function<void(AccessControl::Done<T>)> start) {
    std::optional<Result<T>> out;
    start([&](Result<T> r) { out = std::move(r); });
    clock_.run_ready();
    EXPECT_TRUE(out.has_value());
    return out.value_or(Result<T>(internal_error("no answer")));
  }

  std::string add_user(const std::string& name, Role role, std::vector<std::string> groups = {}) {
    auto token = wait<std::string>([&](auto done) { access_.add_user({name, role, std::move(groups)}, done); });
    EXPECT_TRUE(token.ok()) << token.error().message;
    return token.ok() ? token.value() : "";
  }

  Result<UserRecord> update(const std::string& name, const AccessControl::UserUpdate& change) {
    return wait<UserRecord>([&](auto done) { access_.update_user(name, change, done); });
  }
  Result<UserRecord> set_disabled(const std::string& name, bool disabled) {
    AccessControl::UserUpdate change;
    change.disabled = disabled;
    return update(name, change);
  }

  static constexpr const char* kAdminToken = "agu_first-admin";
  static constexpr const char* kJoinToken = "agj_first-join";
  FakeClock clock_;
  store::MemoryStore store_;
  AccessControl access_{{store_, clock_, clock_}};
};

TEST_F(AccessControlTest, TheFirstTokensBelongToTheAdminAndToAJoinTokenThatDoesNotExpire) {
  Principal admin = access_.authenticate_token(kAdminToken);
  EXPECT_EQ(admin.kind, Principal::Kind::kUser);
  EXPECT_EQ(admin.name, "admin");
  EXPECT_TRUE(admin.is_admin());
  Principal join = access_.authenticate_token(kJoinToken);
  EXPECT_EQ(join.kind, Principal::Kind::kJoin);
  clock_.advance(int64_t{400} * 24 * 3600 * 1000);
  EXPECT_EQ(access_.authenticate_token(kJoinToken).kind, Principal::Kind::kJoin);
  // A second bootstrap (a restart) changes nothing.
  EXPECT_TRUE(access_.bootstrap("agu_other", std::nullopt));
  EXPECT_EQ(access_.authenticate_token("agu_other").kind, Principal::Kind::kNone);
  EXPECT_EQ(access_.users().size(), 1u);
}

TEST_F(AccessControlTest, UnknownTokensAreRefusedSayingSo) {
  for (const char* token : {"", "agu_nope", "agu_first-admi", "agu_first-admin "}) {
    Principal who = access_.authenticate_token(token);
    EXPECT_EQ(who.kind, Principal::Kind::kNone) << token;
    EXPECT_FALSE(who.refusal.empty());
  }
}

TEST_F(AccessControlTest, OnlyHashesAreStored) {
  std::string token = add_user("alice", Role::kUser);
  auto users = store_.scan("users");
  ASSERT_TRUE(users.ok());
  for (const auto& [_, value] : users.value()) {
    EXPECT_THAT(value, ::testing::Not(HasSubstr(token)));
    EXPECT_THAT(value, ::testing::Not(HasSubstr(kAdminToken)));
  }
}

TEST_F(AccessControlTest, EverythingSurvivesARestart) {
  std::string alice = add_user("alice", Role::kViewer, {"ml"});
  auto node = wait<std::string>([&](auto done) { access_.issue_node_credential("node_a", done); });
  auto session = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  ASSERT_TRUE(node.ok() && session.ok());

  AccessControl restarted({store_, clock_, clock_});
  ASSERT_TRUE(restarted.recover());
  EXPECT_EQ(restarted.cookie_name(), access_.cookie_name());
  Principal who = restarted.authenticate_token(alice);
  EXPECT_EQ(who.name, "alice");
  EXPECT_EQ(who.role, Role::kViewer);
  EXPECT_EQ(who.groups, std::vector<std::string>{"ml"});
  EXPECT_EQ(restarted.authenticate_token(node.value()).name, "node_a");
  EXPECT_EQ(restarted.authenticate_session(session.value()).name, "alice");
  EXPECT_EQ(restarted.authenticate_token(kJoinToken).kind, Principal::Kind::kJoin);
}

TEST_F(AccessControlTest, AChangeTheStoreCannotWriteIsUndoneAndReported) {
  std::string alice = add_user("alice", Role::kUser);
  store_.fail_next_writes(1);
  auto rotated = wait<std::string>([&](auto done) { access_.rotate_user("alice", done); });
  ASSERT_FALSE(rotated.ok());
  EXPECT_EQ(rotated.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(access_.authenticate_token(alice).name, "alice");  // the old token still works

  store_.fail_next_writes(1);
  auto bob = wait<std::string>([&](auto done) { access_.add_user({"bob", Role::kUser}, done); });
  ASSERT_FALSE(bob.ok());
  EXPECT_EQ(access_.find_user("bob"), nullptr);

  store_.fail_next_writes(1);
  auto node = wait<std::string>([&](auto done) { access_.issue_node_credential("node_a", done); });
  ASSERT_FALSE(node.ok());
  EXPECT_FALSE(access_.has_node_credential("node_a"));
}

TEST_F(AccessControlTest, ARefusedChangeThatEndsSessionsKeepsThem) {
  add_user("alice", Role::kUser);
  auto session = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  ASSERT_TRUE(session.ok());
  // Rotating, disabling or deleting ends a user's sessions; refused, each keeps them, as
  // the store does.
  store_.fail_next_writes(1);
  EXPECT_FALSE(wait<std::string>([&](auto done) { access_.rotate_user("alice", done); }).ok());
  EXPECT_EQ(access_.authenticate_session(session.value()).name, "alice") << "after a refused rotation";
  store_.fail_next_writes(1);
  EXPECT_FALSE(set_disabled("alice", true).ok());
  EXPECT_EQ(access_.authenticate_session(session.value()).name, "alice") << "after a refused disable";
  store_.fail_next_writes(1);
  EXPECT_FALSE(wait<bool>([&](auto done) { access_.delete_user("alice", done); }).ok());
  EXPECT_EQ(access_.authenticate_session(session.value()).name, "alice") << "after a refused delete";
  AccessControl restarted({store_, clock_, clock_});
  ASSERT_TRUE(restarted.recover());
  EXPECT_EQ(restarted.authenticate_session(session.value()).name, "alice");
  // Done, it ends them.
  ASSERT_TRUE(wait<bool>([&](auto done) { access_.delete_user("alice", done); }).ok());
  EXPECT_EQ(access_.authenticate_session(session.value()).kind, Principal::Kind::kNone);
}

TEST_F(AccessControlTest, ARefusedUserChangeTakesNoLaterOneBackWithIt) {
  add_user("alice", Role::kUser);
  AccessControl::UserUpdate promote;
  promote.role = Role::kAdmin;
  AccessControl::UserUpdate join_ml;
  join_ml.add_groups = {"ml"};
  // Two changes to one user sent before the first is stored; the store refuses the first.
  store_.hold_writes();
  std::optional<Result<UserRecord>> promoted, joined;
  access_.update_user("alice", promote, [&](Result<UserRecord> r) { promoted = std::move(r); });
  access_.update_user("alice", join_ml, [&](Result<UserRecord> r) { joined = std::move(r); });
  store_.fail_next_writes(1);
  store_.release_writes();
  clock_.run_ready();
  ASSERT_TRUE(promoted.has_value() && joined.has_value());
  EXPECT_EQ(promoted->error().code, ErrorCode::kResourceExhausted);
  ASSERT_TRUE(joined->ok()) << joined->error().message;
  EXPECT_EQ(joined->value().role, Role::kUser);
  // In memory and in the store alike: the refused promotion is not there, the group is.
  AccessControl restarted({store_, clock_, clock_});
  ASSERT_TRUE(restarted.recover());
  for (const AccessControl* access : std::vector<const AccessControl*>{&access_, &restarted}) {
    const UserRecord* alice = access->find_user("alice");
    ASSERT_NE(alice, nullptr);
    EXPECT_EQ(alice->role, Role::kUser);
    EXPECT_EQ(alice->groups, std::vector<std::string>{"ml"});
  }
}

TEST_F(AccessControlTest, ARefusedNodeCredentialTakesNoLaterOneBackWithIt) {
  store_.hold_writes();
  std::optional<Result<std::string>> first, second;
  access_.issue_node_credential("node_a", [&](Result<std::string> r) { first = std::move(r); });
  access_.issue_node_credential("node_a", [&](Result<std::string> r) { second = std::move(r); });
  store_.fail_next_writes(1);
  store_.release_writes();
  clock_.run_ready();
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_FALSE(first->ok());
  ASSERT_TRUE(second->ok()) << second->error().message;
  EXPECT_EQ(access_.authenticate_token(second->value()).name, "node_a");
  EXPECT_TRUE(access_.has_node_credential("node_a"));
  AccessControl restarted({store_, clock_, clock_});
  ASSERT_TRUE(restarted.recover());
  EXPECT_EQ(restarted.authenticate_token(second->value()).name, "node_a");
}

TEST_F(AccessControlTest, DisablingOrRotatingEndsTheUsersSessions) {
  std::string alice = add_user("alice", Role::kUser);
  auto s1 = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  ASSERT_TRUE(s1.ok());
  EXPECT_THAT(s1.value(), StartsWith("ags_"));
  ASSERT_TRUE(set_disabled("alice", true).ok());
  EXPECT_EQ(access_.authenticate_session(s1.value()).kind, Principal::Kind::kNone);
  EXPECT_THAT(access_.authenticate_token(alice).refusal, HasSubstr("is disabled"));
  ASSERT_TRUE(set_disabled("alice", false).ok());

  auto s2 = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  ASSERT_TRUE(wait<std::string>([&](auto done) { access_.rotate_user("alice", done); }).ok());
  EXPECT_EQ(access_.authenticate_session(s2.value()).kind, Principal::Kind::kNone);
  EXPECT_EQ(access_.authenticate_token(alice).kind, Principal::Kind::kNone);
}

TEST_F(AccessControlTest, SessionsExpireAndEndAtSignOut) {
  add_user("alice", Role::kUser);
  auto s = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  Principal who = access_.authenticate_session(s.value());
  ASSERT_TRUE(who.via_cookie());
  ASSERT_TRUE(wait<bool>([&](auto done) { access_.end_session(who.session_hash, done); }).value());
  EXPECT_EQ(access_.authenticate_session(s.value()).kind, Principal::Kind::kNone);

  auto t = wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); });
  clock_.advance(60'000);
  EXPECT_EQ(access_.authenticate_session(t.value()).kind, Principal::Kind::kNone);
}

TEST_F(AccessControlTest, AUserHoldsABoundedNumberOfSessionsTheOldestGoingFirst) {
  add_user("alice", Role::kUser);
  std::vector<std::string> sessions;
  for (int i = 0; i < 65; ++i) {
    clock_.advance(1);
    sessions.push_back(wait<std::string>([&](auto done) { access_.create_session("alice", 60'000, done); }).value());
  }
  EXPECT_EQ(access_.authenticate_session(sessions.front()).kind, Principal::Kind::kNone);
  EXPECT_EQ(access_.authenticate_session(sessions[1]).name, "alice");
  EXPECT_EQ(access_.authenticate_session(sessions.back()).name, "alice");
}

TEST_F(AccessControlTest, TheLastEnabledAdminCannotBeDisabled) {
  auto refused = set_disabled("admin", true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  add_user("root2", Role::kAdmin);
  EXPECT_TRUE(set_disabled("admin", true).ok());
}

TEST_F(AccessControlTest, NamesAreChecked) {
  for (const char* bad : {"", "Alice", "1abc", "a b", "../x", "a/b", "averyveryveryveryverylongname-over-32"}) {
    EXPECT_FALSE(check_account_name("user name", bad)) << bad;
  }
  for (const char* good : {"a", "alice", "bob_2", "ml-team"}) EXPECT_TRUE(check_account_name("user name", good));
  auto dup = wait<std::string>([&](auto done) { access_.add_user({"admin", Role::kUser}, done); });
  EXPECT_EQ(dup.error().code, ErrorCode::kConflict);
}

TEST_F(AccessControlTest, ANewNodeCredentialReplacesTheOldOne) {
  auto first = wait<std::string>([&](auto done) { access_.issue_node_credential("node_a", done); });
  auto second = wait<std::string>([&](auto done) { access_.issue_node_credential("node_a", done); });
  EXPECT_EQ(access_.authenticate_token(first.value()).kind, Principal::Kind::kNone);
  EXPECT_EQ(access_.authenticate_token(second.value()).name, "node_a");
  ASSERT_TRUE(wait<bool>([&](auto done) { access_.revoke_node_credential("node_a", done); }).value());
  EXPECT_EQ(access_.authenticate_token(second.value()).kind, Principal::Kind::kNone);
}

// ---- the policy ----

Principal user(const std::string& name, Role role, std::vector<std::string> groups = {}) {
  Principal p;
  p.kind = Principal::Kind::kUser;
  p.name = name;
  p.role = role;
  p.groups = std::move(groups);
  return p;
}

TEST(AccessPolicy, WhoMayActOnAJob) {
  const std::vector<std::string> alices_groups{"vision"};
  EXPECT_TRUE(may_act_on_job(user("alice", Role::kUser), "alice", alices_groups));
  EXPECT_TRUE(may_act_on_job(user("carol", Role::kUser, {"nlp", "vision"}), "alice", alices_groups));
  EXPECT_FALSE(may_act_on_job(user("bob", Role::kUser, {"nlp"}), "alice", alices_groups));
  EXPECT_TRUE(may_act_on_job(user("root", Role::kAdmin), "alice", alices_groups));
  // A viewer never, not even in the group or with the owner's name.
  EXPECT_FALSE(may_act_on_job(user("vic", Role::kViewer, {"vision"}), "alice", alices_groups));
  EXPECT_FALSE(may_act_on_job(user("alice", Role::kViewer), "alice", alices_groups));
  // A job from before users has no owner: admins only.
  EXPECT_FALSE(may_act_on_job(user("", Role::kUser), "", {}));
  Principal node;
  node.kind = Principal::Kind::kNode;
  node.name = "alice";
  EXPECT_FALSE(may_act_on_job(node, "alice", {}));
}

TEST(AccessPolicy, WhoMaySubmitAndRead) {
  EXPECT_TRUE(may_submit(user("a", Role::kUser)));
  EXPECT_TRUE(may_submit(user("a", Role::kAdmin)));
  EXPECT_FALSE(may_submit(user("a", Role::kViewer)));
  EXPECT_TRUE(may_read_status(user("a", Role::kViewer)));
  Principal join;
  join.kind = Principal::Kind::kJoin;
  EXPECT_FALSE(may_submit(join));
  EXPECT_FALSE(may_read_status(join));
}

TEST_F(AccessControlTest, AUsersRoleAndGroupsChangeAndTheLastAdminStays) {
  const std::string token = add_user("alice", Role::kUser, {"vision"});
  AccessControl::UserUpdate change;
  change.role = Role::kViewer;
  change.add_groups = {"speech", "vision"};
  auto changed = update("alice", change);
  ASSERT_TRUE(changed.ok()) << changed.error().message;
  EXPECT_EQ(changed.value().groups, (std::vector<std::string>{"vision", "speech"})) << "a group held is not added twice";
  EXPECT_EQ(access_.authenticate_token(token).role, Role::kViewer) << "at once, on the next request";
  AccessControl::UserUpdate drop;
  drop.remove_groups = {"vision"};
  EXPECT_EQ(update("alice", drop).value().groups, std::vector<std::string>{"speech"});
  // Bad input changes nothing.
  auto not_in = update("alice", drop);
  ASSERT_FALSE(not_in.ok());
  EXPECT_EQ(not_in.error().message, "user 'alice' is not in group 'vision' (nothing was changed)");
  AccessControl::UserUpdate bad_group;
  bad_group.add_groups = {"Bad Group"};
  bad_group.role = Role::kAdmin;
  EXPECT_EQ(update("alice", bad_group).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(access_.find_user("alice")->role, Role::kViewer);
  EXPECT_EQ(update("nobody", drop).error().code, ErrorCode::kNotFound);
  AccessControl::UserUpdate demote;
  demote.role = Role::kUser;
  EXPECT_EQ(update("admin", demote).error().code, ErrorCode::kConflict) << "the last enabled admin";
}

TEST_F(AccessControlTest, ADeletedUsersTokenAndSessionsEndAndTheLastAdminIsKept) {
  const std::string token = add_user("bob", Role::kUser);
  auto session = wait<std::string>([&](auto done) { access_.create_session("bob", 60'000, done); });
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE(wait<bool>([&](auto done) { access_.delete_user("bob", done); }).ok());
  EXPECT_EQ(access_.find_user("bob"), nullptr);
  EXPECT_EQ(access_.authenticate_token(token).kind, Principal::Kind::kNone);
  EXPECT_EQ(access_.authenticate_session(session.value()).kind, Principal::Kind::kNone);
  EXPECT_EQ(wait<bool>([&](auto done) { access_.delete_user("bob", done); }).error().code, ErrorCode::kNotFound);
  auto last = wait<bool>([&](auto done) { access_.delete_user("admin", done); });
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().code, ErrorCode::kConflict);
  // Gone for a new AccessControl over the same store too.
  AccessControl again({store_, clock_, clock_});
  ASSERT_TRUE(again.recover().ok());
  EXPECT_EQ(again.find_user("bob"), nullptr);
  EXPECT_NE(again.find_user("admin"), nullptr);
  // A store that refuses the write keeps the user.
  add_user("carol", Role::kUser);
  store_.fail_next_writes(1);
  EXPECT_FALSE(wait<bool>([&](auto done) { access_.delete_user("carol", done); }).ok());
  EXPECT_NE(access_.find_user("carol"), nullptr);
}

}  // namespace
}  // namespace ag::head
