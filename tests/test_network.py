"""The network rules of the preflight (resolver/_network.py) over dict worlds and fake network probes.

Each world is two or three emulated hosts: n1 (rank 0's) at 10.9.0.1 on eth0, n2 at 10.9.0.2, n3 at
10.9.0.3; each host's facts come from `facts()` asked of fake probes, as a real process gathers them
(tests/launchers/test_network.py runs the same faults for real, in network namespaces).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver._check import CheckReport, Member, member, record, verdict
from resolver._network import covered, facts, ifname_exports, judge, proxy, selected, settings, toward_main
from resolver.errors import InvalidSettings, ProbeFailed
from resolver.testing import torchrun_job

ADDRESS = {"n1": "10.9.0.1", "n2": "10.9.0.2", "n3": "10.9.0.3"}


def host_probes(
    host: str,
    *,
    hostname_maps_to: str | None = None,
    names: Mapping[str, Sequence[str]] | None = None,
    extra: Mapping[str, Sequence[str]] | None = None,
) -> probes.Probes:
    """A host's fake probes: eth0 holds its address, the others' names resolve to theirs (its own name to
    `hostname_maps_to` when given, as Debian's 127.0.1.1), and everything else routes through eth0."""
    known: dict[str, Sequence[str]] = {name: (address,) for name, address in ADDRESS.items()}
    if hostname_maps_to is not None:
        known[host] = (hostname_maps_to,)
    known.update(names or {})
    table = {"lo": ("127.0.0.1", "::1"), "eth0": (ADDRESS[host],), **(extra or {})}
    routes = dict.fromkeys(ADDRESS.values(), "eth0")
    return probes.fake(hostname=host, interfaces=table, names=known, routes=routes)


def world(
    hosts: Sequence[str] = ("n1", "n2"),
    *,
    main: Mapping[str, str] | None = None,
    environ: Mapping[str, Mapping[str, str]] | None = None,
    resolved: Mapping[str, Sequence[str]] | None = None,
    waited: Mapping[str, float] | None = None,
    on: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Member]:
    """One process per host, as rank 0 receives them: each record with its host's `facts` (rank 0 asks its
    probes; the others give what the connection to rank 0 showed: `resolved` (default: the main name's
    address) and the local address on eth0). `on` gives `host_probes` options per host."""
    job = torchrun_job(nnodes=len(hosts), nproc_per_node=1, hosts=tuple(hosts), master_addr="n1", master_port=29500)
    members = []
    for process, host in zip(job.processes, hosts, strict=True):
        env = {**process.environ, **(environ or {}).get(host, {})}
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        if main and host in main:
            env["MASTER_ADDR"] = main[host]
        topology = resolver.resolve(env, probes.fake())
        asked = host_probes(host, **(on or {}).get(host, {}))
        address = env["MASTER_ADDR"]
        if host == "n1":  # rank 0: the others reached its eth0 address, whatever its own lookup says
            net = facts(env, address, asked, local=ADDRESS["n1"] if len(hosts) > 1 else None)
        else:
            got = (resolved or {}).get(host) or asked.lookup(address)
            net = facts(
                env,
                address,
                asked,
                resolved=got,
                local=ADDRESS[host],
                peer=ADDRESS["n1"] if ADDRESS["n1"] in got else got[0],  # where its connection got through
                waited=(waited or {}).get(host, 0),
            )
        members.append(member({**record(topology, host, settings=settings(env, address)), "net": net}))
    return members


def kinds(found: Sequence[Any]) -> list[str]:
    return [p.kind for p in found]


# -- the variables' grammar ------------------------------------------------------------------------------


NAMES = ("lo", "eth0", "eth1", "ib0", "docker0")


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("GLOO_SOCKET_IFNAME", "eth0", ("eth0",)),
        ("GLOO_SOCKET_IFNAME", "eth0,ib0", ("eth0", "ib0")),
        ("GLOO_SOCKET_IFNAME", "eth", ()),  # Gloo takes exact names only
        ("NCCL_SOCKET_IFNAME", "eth", ("eth0", "eth1")),  # NCCL: a prefix by default
        ("NCCL_SOCKET_IFNAME", "=eth", ()),
        ("NCCL_SOCKET_IFNAME", "=eth1", ("eth1",)),
        ("NCCL_SOCKET_IFNAME", "ib,eth1", ("eth1", "ib0")),
        ("NCCL_SOCKET_IFNAME", "^docker,lo", ("eth0", "eth1", "ib0")),
        ("NCCL_SOCKET_IFNAME", "^=eth0", ("lo", "eth1", "ib0", "docker0")),
        ("NCCL_SOCKET_IFNAME", "nosuch0", ()),
    ],
)
def test_what_an_interface_variable_selects(variable: str, value: str, expected: tuple[str, ...]) -> None:
    assert selected(variable, value, NAMES) == expected


def test_an_unknown_interface_variable_is_refused() -> None:
    with pytest.raises(ValueError, match="GLOO_SOCKET_IFNAME or NCCL_SOCKET_IFNAME"):
        selected("UCX_NET_DEVICES", "mlx5_0:1", NAMES)


@pytest.mark.parametrize(
    ("host", "listed", "expected"),
    [
        ("n1", "n1", True),
        ("n1.cluster.local", ".cluster.local", True),
        ("n1.cluster.local", "cluster.local", True),
        ("n1.cluster.local", "other.local,*", True),
        ("10.9.0.1", "10.9.0.0/24", True),
        ("10.9.0.1", "10.8.0.0/24,n1", False),
        ("n1", "n10", False),
        ("n1", "", False),
        ("::1", "[::1]", True),
    ],
)
def test_no_proxy_covers(host: str, listed: str, expected: bool) -> None:
    assert covered(host, listed) is expected


def test_grpc_takes_the_first_proxy_variable_and_the_first_no_proxy_list() -> None:
    assert proxy({}, "n1") is None
    assert proxy({"http_proxy": "http://p:3128"}, "n1") == ("http_proxy", "http://p:3128")
    both = {"http_proxy": "http://a:1", "grpc_proxy": "http://g:1"}
    assert proxy(both, "n1") == ("grpc_proxy", "http://g:1")
    # no_grpc_proxy wins over no_proxy when it has a value: n1 is not in it, so the proxy stands
    assert proxy({**both, "no_grpc_proxy": "n2", "no_proxy": "n1"}, "n1") == ("grpc_proxy", "http://g:1")
    assert proxy({**both, "no_proxy": "n1"}, "n1") is None
    assert proxy({"HTTP_PROXY": "http://p:3128"}, "n1") is None  # gRPC core reads the lower-case names


def test_ifname_exports_leave_a_users_value_alone() -> None:
    assert ifname_exports({}, "eth1") == {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "=eth1"}
    assert ifname_exports({"NCCL_SOCKET_IFNAME": "ib"}, "eth1") == {"GLOO_SOCKET_IFNAME": "eth1"}


# -- the facts -------------------------------------------------------------------------------------------


def test_rank_0s_facts_name_the_interface_holding_the_main_address() -> None:
    net = facts({"MASTER_ADDR": "n1"}, "n1", host_probes("n1"))
    assert (net["interface"], net["address"], net["resolved"]) == ("eth0", "10.9.0.1", ["10.9.0.1"])
    # Debian's 127.0.1.1: rank 0's own lookup leads to lo; the address the others reached says eth0
    debian = host_probes("n1", hostname_maps_to="127.0.1.1")
    assert facts({}, "n1", debian)["interface"] == "lo"
    net = facts({}, "n1", debian, local="10.9.0.1")
    assert (net["interface"], net["resolved"], net["hostname_addresses"]) == ("eth0", ["127.0.1.1"], ["127.0.1.1"])
    assert "10.9.0.1" in net["addresses"]


def test_facts_are_what_the_host_could_find_never_an_error() -> None:
    net = facts({}, "n1", probes.fake())  # no network probes at all
    assert net["interface"] is None and net["resolved"] is None
    assert "fake probes were not given" in net["lookup_error"] and net["interfaces_error"]


def test_exec_ifname_counts_as_the_interface_variables() -> None:
    net = facts({}, "n1", host_probes("n2"), resolved=["10.9.0.1"], local="10.9.0.2", ifname=True)
    assert net["ifnames"]["GLOO_SOCKET_IFNAME"] == {"value": "eth0", "selected": ["eth0"], "by": "exec --ifname"}
    assert net["ifnames"]["NCCL_SOCKET_IFNAME"]["value"] == "=eth0"


def test_the_route_probe_waits_for_a_late_name_then_names_it() -> None:
    calls = []

    def route(address: str) -> Any:
        calls.append(address)
        if len(calls) < 3:
            raise ProbeFailed("lookup", f"{address!r} does not resolve: Name or service not known")
        return probes.network.Route("eth0", "10.9.0.2")

    late = attrs.evolve(probes.fake(), route=route)
    assert toward_main("n1", late, timeout=5) == "eth0" and len(calls) == 3
    never = attrs.evolve(probes.fake(), route=lambda a: (_ for _ in ()).throw(ProbeFailed("lookup", "nope")))
    with pytest.raises(ProbeFailed, match=r"'n1' did not resolve here within 0.2 s"):
        toward_main("n1", never, timeout=0.2)
    with pytest.raises(InvalidSettings, match="--ifname"):
        toward_main(None, late, timeout=1)


def test_rank_0_whose_name_leads_to_loopback_takes_its_one_other_interface() -> None:
    debian = host_probes("n1", hostname_maps_to="127.0.1.1")
    assert toward_main("n1", debian, timeout=1) == "lo"  # one node: loopback is right
    assert toward_main("n1", debian, timeout=1, spans_nodes=True) == "eth0"
    two = host_probes("n1", hostname_maps_to="127.0.1.1", extra={"eth1": ("192.168.0.1",), "v6": ("fe80::1",)})
    with pytest.raises(InvalidSettings, match=r"among eth0, eth1: run `cluster-topology exec --check --ifname`"):
        toward_main("n1", two, timeout=1, spans_nodes=True)


# -- the verdict -----------------------------------------------------------------------------------------


def test_a_healthy_network_has_nothing_to_say_and_maps_the_interfaces() -> None:
    found = verdict(world(("n1", "n2", "n3")))
    assert not found.problems and not found.warnings, (found.problems, found.warnings)
    assert [(n.host, n.interface, n.address) for n in found.nodes] == [
        ("n1", "eth0", "10.9.0.1"),
        ("n2", "eth0", "10.9.0.2"),
        ("n3", "eth0", "10.9.0.3"),
    ]
    assert str(found.nodes[1]) == "n2  node 1  ranks 1  via eth0 10.9.0.2"


def test_the_main_address_by_name_and_by_address_agree() -> None:
    found = verdict(world(main={"n2": "10.9.0.1"}))
    assert not found.problems and not found.warnings, found.problems


def test_without_network_facts_the_main_address_is_compared_as_text() -> None:
    members = [
        Member(rank=m.rank, host=m.host, topology=m.topology, version=m.version) for m in world(main={"n2": "10.9.0.1"})
    ]
    assert kinds(verdict(members).problems) == ["agreement"]


def test_a_host_name_on_loopback_hangs_gloo_and_is_named_with_its_fix() -> None:
    found = verdict(world(on={"n1": {"hostname_maps_to": "127.0.1.1"}, "n2": {"hostname_maps_to": "127.0.1.1"}}))
    assert kinds(found.problems) == ["hostname"]
    (problem,) = found.problems
    assert problem.hosts == ("n1", "n2") and problem.variable == "GLOO_SOCKET_IFNAME"
    assert "resolves to 127.0.1.1 there, a loopback address" in problem.message
    assert "GLOO_SOCKET_IFNAME=eth0" in problem.message and "exec --ifname" in problem.message


def test_a_host_name_on_another_interface_is_named() -> None:
    extra = {"eth1": ("192.168.0.2",)}  # management: the host name's address; eth0 reaches rank 0
    found = verdict(world(on={"n2": {"hostname_maps_to": "192.168.0.2", "extra": extra}}))
    (problem,) = found.problems
    assert problem.kind == "hostname" and problem.hosts == ("n2",)
    assert "192.168.0.2 there, which is not on eth0, the interface that reaches rank 0" in problem.message


def test_gloo_set_turns_the_host_name_problem_into_a_warning() -> None:
    gloo = {"GLOO_SOCKET_IFNAME": "eth0"}
    found = verdict(
        world(
            environ={"n1": gloo, "n2": gloo},
            on={"n1": {"hostname_maps_to": "127.0.1.1"}, "n2": {"hostname_maps_to": "127.0.1.1"}},
        )
    )
    assert not found.problems and kinds(found.warnings) == ["hostname"]
    assert "Gloo itself is spared" in found.warnings[0].message


def test_a_host_resolving_the_main_name_elsewhere_is_named_with_what_each_got() -> None:
    found = verdict(world(("n1", "n2", "n3"), resolved={"n3": ("10.9.0.7", "10.9.0.1")}))
    (problem,) = found.problems
    assert problem.kind == "address" and problem.hosts == ("n3",) and problem.variable == "MASTER_ADDR"
    assert "on n3, n1 resolves to 10.9.0.7, 10.9.0.1; 10.9.0.7 is not rank 0's (rank 0 on n1 has 10.9.0.1)" in (
        problem.message
    )


def test_a_later_address_that_is_not_rank_0s_is_a_warning() -> None:
    found = verdict(world(resolved={"n2": ("10.9.0.1", "10.9.0.7")}))
    assert not found.problems and kinds(found.warnings) == ["address"]


def test_a_name_resolving_to_different_addresses_of_rank_0_is_a_warning() -> None:
    extra = {"n1": {"extra": {"ib0": ("10.10.0.1",)}}}
    found = verdict(world(("n1", "n2", "n3"), resolved={"n3": ("10.10.0.1",)}, on=extra))
    assert not found.problems
    (warning,) = found.warnings
    assert "n1 resolves differently on different hosts, to 10.10.0.1 on n3; to 10.9.0.1 on n2" in warning.message


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nosuch0", "NCCL_SOCKET_IFNAME=nosuch0 selects no interface on n2, which has eth0, lo"),
        ("^eth0", "NCCL_SOCKET_IFNAME=^eth0 selects lo on n2, but that host reaches rank 0 through eth0"),
        ("^=eth", "NCCL_SOCKET_IFNAME=^=eth selects eth0, lo on n2, but"),
    ],
)
def test_a_wrong_nccl_interface_is_named(value: str, said: str) -> None:
    found = verdict(world(environ={"n2": {"NCCL_SOCKET_IFNAME": value}}))
    if value == "^=eth":  # excludes only an interface named exactly "eth": eth0 stays selected, all is well
        assert not found.problems
        return
    (problem,) = found.problems
    assert problem.kind == "ifname" and problem.variable == "NCCL_SOCKET_IFNAME" and said in problem.message


def test_a_good_prefix_passes_and_gloo_on_two_interfaces_is_a_warning() -> None:
    extra = {"n2": {"extra": {"eth1": ("192.168.0.2",)}}}
    found = verdict(world(environ={"n2": {"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "eth0,eth1"}}, on=extra))
    assert not found.problems and kinds(found.warnings) == ["ifname"]


def test_a_proxy_without_no_proxy_is_a_warning_naming_the_variable() -> None:
    found = verdict(
        world(environ={"n1": {"http_proxy": "http://127.0.0.1:9"}, "n2": {"http_proxy": "http://127.0.0.1:9"}})
    )
    assert not found.problems
    (warning,) = found.warnings
    assert warning.kind == "proxy" and warning.variable == "http_proxy" and warning.hosts == ("n1", "n2")
    covered_too = {"http_proxy": "http://127.0.0.1:9", "no_proxy": "n1"}
    assert not verdict(world(environ={"n1": covered_too, "n2": covered_too})).warnings


def test_a_late_name_is_reported_with_its_wait() -> None:
    found = verdict(world(("n1", "n2", "n3"), waited={"n2": 4.2, "n3": 0.3}))
    assert not found.problems
    (warning,) = found.warnings
    assert warning.kind == "late_name" and warning.hosts == ("n2",) and "4.2 s on n2" in warning.message


def test_a_single_host_job_needs_no_interface() -> None:
    members = world(("n1",), on={"n1": {"hostname_maps_to": "127.0.1.1"}})
    assert not verdict(members).problems


def test_warnings_travel_to_every_process_and_into_the_report() -> None:
    found = verdict(world(waited={"n2": 2.0}))
    wire = type(found).from_wire(found.to_wire())
    assert wire.warnings == found.warnings
    report = CheckReport(
        ok=True,
        world_size=2,
        missing=(),
        problems=(),
        topology=None,
        elapsed_s=0.1,
        summary=found.summary,
        nodes=found.nodes,
        warnings=wire.warnings,
    )
    assert report.to_dict()["warnings"][0]["kind"] == "late_name"
    assert report.to_dict()["nodes"][1]["interface"] == "eth0"
    assert report.lines()[1].startswith("warning: n1 did not resolve at first")


def test_judge_alone_takes_any_member_shape() -> None:
    problems, warnings = judge([], multi_node=True)
    assert problems == [] and warnings == []


def test_exec_ifname_on_rank_0s_node_of_a_job_without_a_node_count() -> None:
    import argparse

    from resolver._exec import interface_variables

    env = {  # torchrun-shaped, no GROUP_WORLD_SIZE: the node count is unknown, 2 processes of 1 per node
        "TORCHELASTIC_RUN_ID": "t",
        "WORLD_SIZE": "2",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "29500",
    }
    debian = host_probes("n1", hostname_maps_to="127.0.1.1")
    topology = resolver.resolve(env, debian)
    args = argparse.Namespace(ifname=True)
    assert interface_variables(args, topology, env, debian) == {
        "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "=eth0",
    }
    assert (interface_variables(args, topology, env, debian, known="eth1") or {})["GLOO_SOCKET_IFNAME"] == "eth1"
    assert interface_variables(args, topology, {**env, "GLOO_SOCKET_IFNAME": "ib0"}, debian) == {
        "NCCL_SOCKET_IFNAME": "=eth0"
    }
    assert interface_variables(args, topology, env, debian, format_="json") == {}  # render() refuses it
    assert interface_variables(argparse.Namespace(ifname=False), topology, env, debian) is None


def test_the_address_a_process_reached_is_rank_0s_even_past_the_addresses_it_listed() -> None:
    members = world(("n1", "n2"))
    zero = members[0]
    assert zero.net is not None
    listed = dict(zero.net, addresses=["127.0.0.1"])  # as if 10.9.0.1 had been cut from a long list
    trimmed = [Member(rank=zero.rank, host=zero.host, topology=zero.topology, version=zero.version, net=listed)]
    assert not verdict([*trimmed, *members[1:]]).problems  # n2 connected to 10.9.0.1: it is rank 0's


def test_link_local_addresses_are_not_sent() -> None:
    net = facts({}, "n1", host_probes("n1", extra={f"veth{i}": (f"fe80::{i}",) for i in range(100)}), local="10.9.0.1")
    assert "10.9.0.1" in net["addresses"] and not any(a.startswith("fe80:") for a in net["addresses"])


# -- each process's own settings, on a host whose facts its leader gathered ------------------------------------


def shared_world(
    environ: Mapping[int, Mapping[str, str]],
    *,
    own_facts: bool = False,
    on: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Member]:
    """Two processes on each of n1 and n2 (ranks 0, 1 and 2, 3), each with its own `environ` additions (by
    rank), as rank 0 receives them from host leaders: each host's facts gathered once by its lowest rank
    (its leader, under its own environment) and given to every record of its batch, each record with its
    own settings. `own_facts`: every process gathers its own instead (as one meeting rank 0 directly)."""
    job = torchrun_job(nnodes=2, nproc_per_node=2, hosts=("n1", "n2"), master_addr="n1", master_port=29500)
    gathered: dict[str, dict[str, Any]] = {}
    members = []
    for rank, process in enumerate(job.processes):
        host = ("n1", "n2")[rank // 2]
        env = {**process.environ, **environ.get(rank, {})}
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        topology = resolver.resolve(env, probes.fake())
        asked = host_probes(host, **(on or {}).get(host, {}))
        if host == "n1":
            net = facts(env, "n1", asked, local=ADDRESS["n1"])
        else:
            net = facts(env, "n1", asked, resolved=[ADDRESS["n1"]], local=ADDRESS[host], peer=ADDRESS["n1"])
        net = net if own_facts else gathered.setdefault(host, net)
        members.append(member({**record(topology, host, settings=settings(env, "n1")), "net": net}))
    return members


def test_a_follower_that_sets_an_interface_variable_its_leader_does_not_is_named_alone() -> None:
    found = verdict(shared_world({3: {"NCCL_SOCKET_IFNAME": "nosuch0"}}))
    (problem,) = found.problems
    assert problem.kind == "ifname" and problem.ranks == (3,) and problem.hosts == ("n2",)
    assert "NCCL_SOCKET_IFNAME=nosuch0 selects no interface on n2 (rank 3), which has eth0, lo" in problem.message


def test_a_leader_whose_setting_its_followers_do_not_share_is_named_alone() -> None:
    found = verdict(shared_world({2: {"NCCL_SOCKET_IFNAME": "^eth0"}}))
    (problem,) = found.problems
    assert problem.ranks == (2,) and "on n2 (rank 2), but that host reaches rank 0 through eth0" in problem.message


def test_a_setting_every_process_of_a_host_shares_names_the_host_as_before() -> None:
    bad = {"NCCL_SOCKET_IFNAME": "nosuch0"}
    (problem,) = verdict(shared_world({2: bad, 3: bad})).problems
    assert problem.ranks == (2, 3) and "selects no interface on n2, which has" in problem.message


def test_a_followers_proxy_and_its_gloo_setting_are_its_own() -> None:
    found = verdict(shared_world({3: {"http_proxy": "http://127.0.0.1:9"}}))
    (warning,) = found.warnings
    assert (
        warning.kind == "proxy"
        and warning.ranks == (3,)
        and "http_proxy=http://127.0.0.1:9 on n2 (rank 3)" in (warning.message)
    )
    debian = {"n2": {"hostname_maps_to": "127.0.1.1"}}
    found = verdict(shared_world({3: {"GLOO_SOCKET_IFNAME": "eth0"}}, on=debian))
    (problem,) = found.problems  # rank 2 leaves Gloo on the host name; rank 3 named eth0 itself
    assert problem.kind == "hostname" and problem.ranks == (2,) and "the host name of n2 (rank 2)" in problem.message
    (warning,) = found.warnings
    assert warning.kind == "hostname" and warning.ranks == (3,) and "Gloo itself is spared" in warning.message


SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "NCCL_SOCKET_IFNAME": st.sampled_from(["eth", "=eth0", "nosuch0", "^eth0", "eth1", "^=lo"]),
        "GLOO_SOCKET_IFNAME": st.sampled_from(["eth0", "eth0,eth1", "lo", "nosuch0"]),
        "http_proxy": st.just("http://127.0.0.1:9"),
        "no_proxy": st.sampled_from(["n1", "example.com"]),
    },
)


@given(
    environ=st.dictionaries(st.integers(0, 3), SETTINGS, max_size=4),
    debian=st.booleans(),
    second_interface=st.booleans(),
)
def test_judging_through_the_leaders_facts_is_judging_each_processs_own(
    environ: dict[int, dict[str, str]], debian: bool, second_interface: bool
) -> None:
    """Whatever each process sets, the findings are those of a world where every process gathered its own facts."""
    on: dict[str, dict[str, Any]] = {"n2": {"hostname_maps_to": "127.0.1.1"}} if debian else {}
    if second_interface:
        on.setdefault("n2", {})["extra"] = {"eth1": ("192.168.0.2",)}
    shared = verdict(shared_world(environ, on=on))
    alone = verdict(shared_world(environ, on=on, own_facts=True))
    assert (shared.problems, shared.warnings) == (alone.problems, alone.warnings)


def test_an_interface_variable_is_not_judged_where_the_hosts_interfaces_are_unknown() -> None:
    """The interfaces probe failed (or the host has more names than travel): what a variable selects is unknown,
    not nothing."""
    unknown = probes.fake(hostname="n2", names={"n1": (ADDRESS["n1"],)})
    net = facts({"NCCL_SOCKET_IFNAME": "eth0"}, "n1", unknown, resolved=[ADDRESS["n1"]], local=ADDRESS["n2"])
    assert net["interfaces_error"] and net["ifnames"]["NCCL_SOCKET_IFNAME"]["selected"] is None
    members = world()
    own = settings({"NCCL_SOCKET_IFNAME": "eth0"}, "n1")
    members[1] = member({**record(members[1].topology, "n2", settings=own), "net": net})
    assert not [p for p in verdict(members).problems if p.kind == "ifname"]
    crowded = {"n2": {"extra": {f"veth{i:03d}": () for i in range(80)}}}  # 82 names, 64 of them sent
    bad = {"NCCL_SOCKET_IFNAME": "nosuch0"}
    assert not verdict(shared_world({3: bad}, on=crowded)).problems  # the follower's: against 64 of 82 names
    (problem,) = verdict(shared_world({2: bad}, on=crowded)).problems  # the leader's: against all of them
    assert problem.ranks == (2,) and problem.kind == "ifname"
