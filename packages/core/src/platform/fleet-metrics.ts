/** The Prometheus metrics of one process's share of the fleet's Get order budget and breaker (fleet.ts). */
import { Counter, Gauge, type Registry } from 'prom-client';

/** The budget's and the shared breaker's metrics of one process. */
export function fleetMetrics(registry: Registry, maxRps: number) {
  const registers = [registry];
  const budget = new Gauge({
    name: 'mcb_platform_budget_rps',
    help: 'Get order requests per second the whole fleet may send (PLATFORM_MAX_RPS; 0 = none)',
    registers,
  });
  budget.set(maxRps);
  const granted = new Counter({
    name: 'mcb_platform_budget_granted_total',
    help:
      'Get order start times this process used: from the fleet budget, or locally (its last fair share) while ' +
      'Redis was away',
    labelNames: ['mode'],
    registers,
  });
  granted.inc({ mode: 'fleet' }, 0);
  granted.inc({ mode: 'local' }, 0);
  return {
    granted,
    refusals: new Counter({
      name: 'mcb_platform_budget_refusals_total',
      help: 'Reservations the fleet budget refused or cut short: the fleet asked for more than the budget (throttled)',
      registers,
    }),
    clamps: new Counter({
      name: 'mcb_platform_budget_clock_clamps_total',
      help:
        "Reservations that found the budget's timestamp further ahead of Redis's clock than the budget ever moves " +
        'it (written under a faster clock: a failover, an NTP step) and clamped it',
      registers,
    }),
    fallback: new Gauge({
      name: 'mcb_platform_budget_fallback',
      help: '1 while Redis is unreachable and this process keeps to its last fair share of the budget',
      registers,
    }),
    shareRps: new Gauge({
      name: 'mcb_platform_budget_share_rps',
      help: "This process's share of the budget while Redis is unreachable (budget / processes last seen alive)",
      registers,
    }),
    processes: new Gauge({
      name: 'mcb_platform_fleet_processes',
      help: 'Processes sharing the Get order budget, as last seen (alive within 10 s)',
      registers,
    }),
    breakerOpen: new Gauge({
      name: 'mcb_platform_fleet_breaker_open',
      help: "1 while the fleet's shared circuit breaker is open (as this process last saw it)",
      registers,
    }),
    probes: new Counter({
      name: 'mcb_platform_fleet_probes_total',
      help: 'Probes of an open breaker this process sent (the fleet sends a few a second in all)',
      registers,
    }),
  };
}

/** The metrics {@link fleetMetrics} registers. */
export type FleetMetrics = ReturnType<typeof fleetMetrics>;
