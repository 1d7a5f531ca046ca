"""strom_api.error_codes.ErrorCode is common.proto's ErrorCode, member for member: a code added
to the contract without its member (or the other way round) fails here."""

from __future__ import annotations

from strom_api.error_codes import ErrorCode
from strom_api.v1 import common_pb2


def test_the_enum_has_exactly_the_contract_s_codes():
    assert [member.value for member in ErrorCode] == list(common_pb2.ErrorCode.keys())


def test_a_member_is_its_name_where_a_string_is_expected():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == "NOT_LEADER_OR_FOLLOWER"
    assert f"{ErrorCode.NOT_LEADER_OR_FOLLOWER}: x" == "NOT_LEADER_OR_FOLLOWER: x"
    assert common_pb2.ErrorCode.Value(ErrorCode.NOT_LEADER_OR_FOLLOWER) == 6
