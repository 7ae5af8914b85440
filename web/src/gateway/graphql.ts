import { badAnswer, GatewayError, send } from './api';

interface GraphqlAnswer<T> {
  data?: T | null;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
}

/** Runs a query of the ledger (`/graphql`) as the session's wallet. */
export async function queryLedger<T>(token: string, query: string, variables: Record<string, unknown> = {}) {
  const response = await send('/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json().catch(() => null)) as GraphqlAnswer<T> | null;
  if (!body) throw badAnswer('/graphql', response);
  const [first] = body.errors ?? [];
  if (first)
    throw new GatewayError(first.message, first.extensions?.code ?? 'graphql_error', response.status);
  if (!body.data) throw badAnswer('/graphql', response);
  return body.data;
}

export interface Money {
  usd: string;
  picoUsd: string;
}

export interface UsageRow {
  requestId: string;
  model: string;
  rail: 'session' | 'x402';
  createdAt: string;
  exact: boolean;
  tokens: { prompt: number; completion: number; cacheRead: number; cacheWrite: number; reasoning: number };
  cost: { provider: Money; commission: Money; total: Money };
  settlement: {
    id: string;
    status: 'pending' | 'sent' | 'confirmed' | 'failed';
    txHash: string | null;
  } | null;
}

export interface UsagePage {
  usage: {
    edges: Array<{ cursor: string; node: UsageRow }>;
    pageInfo: { hasNextPage: boolean; endCursor: string | null };
  };
}

const MONEY = 'usd picoUsd';

export const USAGE_QUERY = `query Usage($first: Int, $after: String, $model: String, $from: DateTime, $to: DateTime) {
  usage(first: $first, after: $after, model: $model, from: $from, to: $to) {
    edges { cursor node {
      requestId model rail createdAt exact
      tokens { prompt completion cacheRead cacheWrite reasoning }
      cost { provider { ${MONEY} } commission { ${MONEY} } total { ${MONEY} } }
      settlement { id status txHash }
    } }
    pageInfo { hasNextPage endCursor }
  }
}`;

export interface Account {
  me: {
    wallet: string;
    debt: { unpaid: Money; credit: Money; owed: Money; owedAtomic: string };
    totals: {
      usage: { requests: string; providerCost: Money; commission: Money; cost: Money };
      settlements: number;
      settledUsd: string;
    };
  };
}

export const ACCOUNT_QUERY = `query Account {
  me {
    wallet
    debt { unpaid { ${MONEY} } credit { ${MONEY} } owed { ${MONEY} } owedAtomic }
    totals {
      usage { requests providerCost { ${MONEY} } commission { ${MONEY} } cost { ${MONEY} } }
      settlements settledUsd
    }
  }
}`;

export interface SpendBucket {
  key: string;
  usage: { requests: string; cost: Money };
}

export interface Spend {
  byDay: SpendBucket[];
  byModel: SpendBucket[];
}

export const SPEND_QUERY = `query Spend($from: DateTime, $to: DateTime) {
  byDay: spend(groupBy: DAY, from: $from, to: $to) { key usage { requests cost { ${MONEY} } } }
  byModel: spend(groupBy: MODEL, from: $from, to: $to) { key usage { requests cost { ${MONEY} } } }
}`;

export interface OperatorSettlement {
  id: string;
  payer: string;
  rail: 'session' | 'x402';
  status: 'pending' | 'sent' | 'failed';
  amountUsd: string;
  txHash: string | null;
  failureReason: string | null;
  createdAt: string;
}

interface SettlementList {
  edges: Array<{ node: OperatorSettlement }>;
  pageInfo: { hasNextPage: boolean };
}

export interface OperatorView {
  operator: {
    economics: Array<{
      day: string;
      rail: 'session' | 'x402';
      requests: string;
      commission: Money;
      settlements: number;
      gasUsed: string;
      gasSpentWei: string;
      gasSpentEth: string;
    }>;
    relayer: {
      address: string;
      balanceWei: string;
      balanceEth: string;
      gasPriceWei: string;
      settlementGas: string;
      settlementsLeft: string | null;
    } | null;
    exposure: { outstanding: Money; unprovenOutstanding: Money; unfinishedSettlements: number };
    pending: SettlementList;
    sent: SettlementList;
    failed: SettlementList;
    collector: {
      running: boolean;
      leading: boolean;
      lastRunAt: string | null;
      lastRunError: string | null;
      collected: number;
      failing: Array<{ payer: string; failures: number; lastError: string; nextAttemptAt: string }>;
    } | null;
    topDebtors: Array<{ wallet: string; unpaid: Money; owed: Money; proven: boolean }>;
  };
}

const OPERATOR_SETTLEMENT =
  'edges { node { id payer rail status amountUsd txHash failureReason createdAt } } pageInfo { hasNextPage }';

/** The operator's page: the same query an operator can script against with the ADMIN_TOKEN. */
export const OPERATOR_QUERY = `query Operator($from: DateTime, $to: DateTime) {
  operator {
    economics(from: $from, to: $to) {
      day rail requests commission { ${MONEY} } settlements gasUsed gasSpentWei gasSpentEth
    }
    relayer { address balanceWei balanceEth gasPriceWei settlementGas settlementsLeft }
    exposure { outstanding { ${MONEY} } unprovenOutstanding { ${MONEY} } unfinishedSettlements }
    pending: settlements(status: pending, first: 20) { ${OPERATOR_SETTLEMENT} }
    sent: settlements(status: sent, first: 20) { ${OPERATOR_SETTLEMENT} }
    failed: settlements(status: failed, first: 20) { ${OPERATOR_SETTLEMENT} }
    collector {
      running leading lastRunAt lastRunError collected
      failing { payer failures lastError nextAttemptAt }
    }
    topDebtors(first: 10) { wallet unpaid { ${MONEY} } owed { ${MONEY} } proven }
  }
}`;
